package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Doer sends one Call for worker w and reads the whole answer into buf.
// A status of 0 means there was no HTTP answer.
type Doer interface {
	Do(ctx context.Context, w int, c Call, buf *bytes.Buffer) (int, error)
	Close()
}

// NetHTTP is a Doer over net/http (NewClient).
type NetHTTP struct{ Client *http.Client }

// Do implements Doer.
func (n NetHTTP) Do(ctx context.Context, _ int, c Call, buf *bytes.Buffer) (int, error) {
	return Do(ctx, n.Client, c, buf)
}

// Close implements Doer.
func (n NetHTTP) Close() { n.Client.CloseIdleConnections() }

// Raw is a minimal HTTP/1.1 keep-alive client: one connection per worker,
// the request written with one write from a reused buffer, the answer read
// with a buffered reader and a Content-Length (or chunked) body. It does
// what the bench needs and no more (no redirects, proxies, TLS or HTTP/2),
// and costs the machine a fraction of net/http's client per request, which
// matters when the load generator shares two CPUs with the system under
// test.
type Raw struct {
	host    string // host:port to dial
	base    string // "http://host:port"
	timeout time.Duration
	conns   []rawConn
}

type rawConn struct {
	c    net.Conn
	br   *bufio.Reader
	wbuf []byte
}

// NewRaw returns a Raw client for workers workers against base
// ("http://host:port"); each request must finish within timeout.
func NewRaw(base string, workers int, timeout time.Duration) (*Raw, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("raw client: want an http://host:port base URL, got %q", base)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":80"
	}
	return &Raw{host: host, base: u.Scheme + "://" + u.Host, timeout: timeout, conns: make([]rawConn, workers)}, nil
}

var errMalformed = errors.New("malformed HTTP response")

// Do implements Doer.
func (r *Raw) Do(ctx context.Context, w int, c Call, buf *bytes.Buffer) (int, error) {
	rc := &r.conns[w]
	if rc.c == nil {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", r.host)
		if err != nil {
			return 0, err
		}
		rc.c, rc.br = conn, bufio.NewReaderSize(conn, 8<<10)
	}
	path := strings.TrimPrefix(c.URL, r.base)
	b := rc.wbuf[:0]
	b = append(b, c.Method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, r.host...)
	b = append(b, "\r\nUser-Agent: seckill-bench\r\n"...)
	if c.Token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, c.Token...)
		b = append(b, "\r\n"...)
	}
	if c.IdempotencyKey != "" {
		b = append(b, "Idempotency-Key: "...)
		b = append(b, c.IdempotencyKey...)
		b = append(b, "\r\n"...)
	}
	if c.Admission != "" {
		b = append(b, "X-Admission: "...)
		b = append(b, c.Admission...)
		b = append(b, "\r\n"...)
	}
	if c.Body != nil {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(c.Body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, c.Body...)
	rc.wbuf = b

	deadline := time.Now().Add(r.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = rc.c.SetDeadline(deadline)
	status, keep, err := rc.roundTrip(b, buf)
	if err != nil || !keep {
		rc.c.Close()
		rc.c, rc.br = nil, nil
	}
	if err != nil {
		return 0, err
	}
	return status, nil
}

func (rc *rawConn) roundTrip(req []byte, buf *bytes.Buffer) (status int, keep bool, err error) {
	if _, err := rc.c.Write(req); err != nil {
		return 0, false, err
	}
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 202 Accepted\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, false, errMalformed
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	keep = line[7] == '1'
	length, chunked := -1, false
	for {
		h, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	buf.Reset()
	switch {
	case chunked:
		err = readChunked(rc.br, buf)
	case length >= 0:
		_, err = io.CopyN(buf, rc.br, int64(length))
	case status == http.StatusNoContent || status == http.StatusNotModified || status < 200:
	default:
		_, err = buf.ReadFrom(rc.br) // delimited by close
		keep = false
	}
	if err != nil {
		return 0, false, err
	}
	return status, keep, nil
}

func readChunked(br *bufio.Reader, buf *bytes.Buffer) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		sz, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(sz), 16, 64)
		if err != nil || n < 0 {
			return errMalformed
		}
		if n == 0 {
			for { // trailers, then the empty line
				t, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(bytes.TrimRight(t, "\r\n")) == 0 {
					return nil
				}
			}
		}
		if _, err := io.CopyN(buf, br, n); err != nil {
			return err
		}
		if _, err := br.Discard(2); err != nil {
			return err
		}
	}
}

// Close implements Doer.
func (r *Raw) Close() {
	for i := range r.conns {
		if r.conns[i].c != nil {
			r.conns[i].c.Close()
			r.conns[i].c = nil
		}
	}
}
