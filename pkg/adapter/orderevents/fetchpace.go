package orderevents

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"
)

// fetchSpacing is the least time between two fetch requests of one
// partition's reader. kafka-go's reader fetches each partition on its own
// connection and asks again as soon as it has handed on what the last
// fetch brought; with MinBytes 1 the broker answers as soon as one event
// is there, so under a steady load every partition is fetched once per
// produce request that reached it. The broker and the consumer spend
// their CPU per fetch, so a load spread over ten partitions paid about ten
// times the fetches of one spread over one. Spaced, a busy partition is
// fetched at most 1/fetchSpacing times a second and each fetch brings what
// came meanwhile. An idle partition's fetch waits in the broker (fetchWait)
// and the first event after a quiet moment is fetched at once: only events
// that follow others by less than fetchSpacing wait, and at most that long.
const fetchSpacing = 10 * time.Millisecond

// apiFetch is the API key of Kafka's Fetch request.
const apiFetch = 1

// pacedDial dials like net.Dialer and spaces the fetch requests sent on
// the connection by at least every.
func pacedDial(every time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pacedConn{Conn: c, every: every}, nil
	}
}

// pacedConn delays a write that is a whole Fetch request (its size prefix
// and API key at the start of the buffer) until every has passed since
// the connection's last one. Nothing written is changed; other requests
// are not delayed.
type pacedConn struct {
	net.Conn
	every time.Duration
	last  atomic.Int64 // unix nanoseconds of the last fetch request
}

func (c *pacedConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && int(binary.BigEndian.Uint32(b)) == len(b)-4 && binary.BigEndian.Uint16(b[4:]) == apiFetch {
		now := time.Now()
		if wait := time.Duration(c.last.Load()) + c.every - time.Duration(now.UnixNano()); wait > 0 {
			time.Sleep(wait)
			now = now.Add(wait)
		}
		c.last.Store(now.UnixNano())
	}
	return c.Conn.Write(b)
}
