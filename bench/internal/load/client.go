package load

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// NewClient returns an HTTP/1.1 client that keeps up to conns connections
// to one host alive, so each worker reuses its own connection.
func NewClient(conns int, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
			WriteBufferSize:     4 << 10,
			ReadBufferSize:      4 << 10,
		},
	}
}

// Call is one HTTP request.
type Call struct {
	Method string
	URL    string
	// Token, if set, is sent as a bearer token.
	Token string
	// IdempotencyKey, if set, is sent as the Idempotency-Key header.
	IdempotencyKey string
	// Admission, if set, is sent as the X-Admission header (an order in a
	// sale with a waiting room).
	Admission string
	Body      []byte
}

// Do sends c and reads the whole answer into buf (reset first). A status
// of 0 means there was no HTTP answer; err says why.
func Do(ctx context.Context, hc *http.Client, c Call, buf *bytes.Buffer) (int, error) {
	var body io.Reader
	if c.Body != nil {
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.URL, body)
	if err != nil {
		return 0, err
	}
	if c.Body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	if c.Token != "" {
		req.Header["Authorization"] = []string{"Bearer " + c.Token}
	}
	if c.IdempotencyKey != "" {
		req.Header["Idempotency-Key"] = []string{c.IdempotencyKey}
	}
	if c.Admission != "" {
		req.Header["X-Admission"] = []string{c.Admission}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// Classify maps an answer to an Outcome; 409 bodies are told apart by their
// error code.
func Classify(status int, body []byte) Outcome {
	switch {
	case status == 0:
		return TransportError
	case status >= 200 && status < 300:
		return Accepted
	case status == http.StatusConflict && bytes.Contains(body, []byte(`"SOLD_OUT"`)):
		return SoldOut
	case status == http.StatusConflict && bytes.Contains(body, []byte(`"ALREADY_PURCHASED"`)):
		return Already
	case status == http.StatusServiceUnavailable:
		return Unavailable
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status >= 500:
		return ServerError
	}
	return ClientError
}
