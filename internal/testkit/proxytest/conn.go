package proxytest

import (
	"bytes"
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the dial to the service.
const dialTimeout = 5 * time.Second

// conn is one proxied connection: a client and its upstream, with two pumps
// a direction (a reader that frames and decides, a writer that delays and
// writes), so that latency never reorders bytes.
type conn struct {
	p      *Proxy
	client net.Conn
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	upstream net.Conn
	pending  []drop // armed losses, in request order
	requests int64  // RESP: requests framed so far

	reqFramer requestFramer // the client reader's own
}

// drop is an armed loss on a connection: the answer to the request with key
// (RESP: its index on the connection; Kafka: its correlation id; MySQL: the
// next answer) is dropped.
type drop struct {
	r   *rule
	key int64
}

// chunk is bytes for a writer to write when due; closeAfter closes the
// connection once they are written.
type chunk struct {
	data       []byte
	due        time.Time
	closeAfter bool
}

func newConn(p *Proxy, client net.Conn) *conn {
	return &conn{p: p, client: client, done: make(chan struct{})}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.client.Close()
		c.mu.Lock()
		if c.upstream != nil {
			_ = c.upstream.Close()
		}
		c.mu.Unlock()
	})
}

func (c *conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *conn) run() {
	defer c.p.wg.Done()
	defer func() {
		c.close()
		c.p.forget(c)
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, d := range pending {
			c.p.giveBack(d.r)
		}
	}()
	up, err := net.DialTimeout("tcp", c.p.target, dialTimeout)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.upstream = up
	c.mu.Unlock()
	if c.closed() { // cut while dialling
		_ = up.Close()
		return
	}
	toUp := make(chan chunk, 256)
	toClient := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); c.read(c.client, toUp, c.requestsFrom) }()
	go func() { defer wg.Done(); c.write(up, toUp) }()
	go func() { defer wg.Done(); c.read(up, toClient, c.answersFrom()) }()
	go func() { defer wg.Done(); c.write(c.client, toClient) }()
	wg.Wait()
}

// filter turns bytes read into bytes to forward; stop ends the direction
// after forwarding out (and closes the connection once out is written).
type filter func(data []byte) (out []byte, stop bool)

func (c *conn) read(src net.Conn, dst chan<- chunk, f filter) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			out, stop := f(buf[:n])
			if !c.send(dst, chunk{data: out, due: time.Now().Add(c.p.delay()), closeAfter: stop}) || stop {
				return
			}
		}
		if err != nil {
			// EOF or an error: whatever was read is still delivered, then
			// the connection closes.
			c.send(dst, chunk{due: time.Now().Add(c.p.delay()), closeAfter: true})
			return
		}
	}
}

func (c *conn) send(dst chan<- chunk, ch chunk) bool {
	select {
	case dst <- ch:
		return true
	case <-c.done:
		return false
	}
}

func (c *conn) write(dst net.Conn, src <-chan chunk) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var ch chunk
		select {
		case ch = <-src:
		case <-c.done:
			return
		}
		if wait := time.Until(ch.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-c.done:
				return
			}
		}
		if len(ch.data) > 0 {
			if _, err := dst.Write(ch.data); err != nil {
				c.close()
				return
			}
		}
		if ch.closeAfter {
			c.close()
			return
		}
	}
}

// requestsFrom frames the client's requests, arms the losses they trigger
// and forwards each request once it is whole (a request is armed before a
// byte of its answer can exist). A request armed to be lost itself is not
// forwarded: what came before it is, then the connection closes.
func (c *conn) requestsFrom(data []byte) ([]byte, bool) {
	return c.frameRequests(data)
}

// partial holds the client's bytes of a request not yet whole; raw is set
// once the stream cannot be framed (it is then forwarded as it is).
type requestFramer struct {
	partial []byte
	raw     bool
}

func (c *conn) frameRequests(data []byte) ([]byte, bool) {
	if c.p.proto == Raw {
		return bytes.Clone(data), false
	}
	f := &c.reqFramer
	buf := append(f.partial, data...)
	if f.raw {
		f.partial = nil
		return buf, false
	}
	off := 0
	for off < len(buf) {
		n, req, isReq, err := parseRequest(c.p.proto, buf[off:])
		if err != nil {
			f.raw = true
			off = len(buf)
			break
		}
		if n == 0 {
			break
		}
		if isReq {
			if r := c.arm(req); r != nil {
				c.p.lose(r)
				f.partial = nil
				return bytes.Clone(buf[:off]), true
			}
		}
		off += n
	}
	out := bytes.Clone(buf[:off])
	f.partial = append([]byte(nil), buf[off:]...)
	return out, false
}

// arm registers the loss req triggers, if any; it returns the rule when
// the loss is req itself.
func (c *conn) arm(req Request) *rule {
	c.mu.Lock()
	index := c.requests
	c.requests++
	c.mu.Unlock()
	r := c.p.match(req)
	if r == nil {
		return nil
	}
	if r.request {
		return r
	}
	d := drop{r: r, key: index}
	if c.p.proto == Kafka {
		d.key = int64(int32(binary.BigEndian.Uint32(req.Payload[4:8])))
	}
	c.mu.Lock()
	c.pending = append(c.pending, d)
	c.mu.Unlock()
	return nil
}

// peek returns the armed loss for key, if any.
func (c *conn) peek(key int64) *rule {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.pending {
		if d.key == key {
			return d.r
		}
	}
	return nil
}

// take removes the armed loss for key.
func (c *conn) take(key int64) { c.due(key, false) }

// due returns and removes the armed loss for key (or the first one, with
// any), if any.
func (c *conn) due(key int64, any bool) *rule {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, d := range c.pending {
		if any || d.key == key {
			c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
			return d.r
		}
	}
	return nil
}

// answersFrom returns the filter of the service's answers for the proxy's
// protocol: it forwards them until the answer to an armed request starts,
// forwards what came before it, drops the rest and stops.
func (c *conn) answersFrom() filter {
	switch c.p.proto {
	case RESP:
		return c.respAnswers()
	case MySQL:
		return func(data []byte) ([]byte, bool) {
			// A MySQL client sends a command only after it has read the
			// previous answer: any byte now is the armed request's answer.
			if r := c.due(0, true); r != nil {
				c.p.lose(r)
				return nil, true
			}
			return bytes.Clone(data), false
		}
	case Kafka:
		return c.kafkaAnswers()
	}
	return func(data []byte) ([]byte, bool) { return bytes.Clone(data), false }
}

// respAnswers frames RESP replies and counts them (push messages are not
// answers to a request). An armed request answered -NOSCRIPT did not run
// (go-redis then sends EVAL): that answer passes and the loss stays armed.
func (c *conn) respAnswers() filter {
	var cur []byte // the reply in progress, from its first byte
	fwd := 0       // how much of cur is forwarded
	var replies int64
	raw := false
	return func(data []byte) ([]byte, bool) {
		if raw {
			return bytes.Clone(data), false
		}
		buf := append(cur, data...)
		start := fwd // buf[:start] is forwarded
		pos, limit := 0, len(buf)
		for pos < len(buf) {
			if pos >= start && buf[pos] != '>' { // a reply starts here
				if r := c.peek(replies); r != nil {
					if buf[pos] == '-' {
						eol := bytes.Index(buf[pos:], crlf)
						if eol < 0 { // an error line not whole yet: hold it
							limit = pos
							break
						}
						if bytes.HasPrefix(buf[pos:], []byte("-NOSCRIPT")) {
							c.take(replies)
							c.p.giveBack(r)
							goto frame
						}
					}
					c.take(replies)
					c.p.lose(r)
					return bytes.Clone(buf[start:pos]), true
				}
			}
		frame:
			n, err := respValue(buf[pos:], 0)
			if err != nil {
				raw = true
				cur, fwd = nil, 0
				return bytes.Clone(buf[start:]), false
			}
			if n == 0 {
				break
			}
			if buf[pos] != '>' {
				replies++
			}
			pos += n
		}
		cur = append([]byte(nil), buf[pos:]...)
		fwd = limit - pos
		return bytes.Clone(buf[start:limit]), false
	}
}

// kafkaAnswers frames Kafka responses (size, correlation id, body). The
// first 8 bytes of a response are held until both are known.
func (c *conn) kafkaAnswers() filter {
	var remain int64 // bytes of the current response still to forward
	var hdr []byte   // held header bytes of the next response
	return func(data []byte) ([]byte, bool) {
		var out []byte
		for len(data) > 0 {
			if remain > 0 {
				k := int(min(remain, int64(len(data))))
				out = append(out, data[:k]...)
				data, remain = data[k:], remain-int64(k)
				continue
			}
			k := min(8-len(hdr), len(data))
			hdr = append(hdr, data[:k]...)
			data = data[k:]
			if len(hdr) < 8 {
				break
			}
			size := int64(int32(binary.BigEndian.Uint32(hdr[0:4])))
			corr := int64(int32(binary.BigEndian.Uint32(hdr[4:8])))
			if r := c.due(corr, false); r != nil {
				c.p.lose(r)
				return out, true
			}
			out = append(out, hdr...)
			hdr = nil
			remain = max(size-4, 0)
		}
		return out, false
	}
}
