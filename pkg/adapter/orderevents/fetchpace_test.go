package orderevents

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// frame returns a Kafka request frame of the given API key (its size
// prefix, key, version and a few body bytes).
func frame(apiKey uint16) []byte {
	b := make([]byte, 4, 20)
	b = binary.BigEndian.AppendUint16(b, apiKey)
	b = append(b, make([]byte, 10)...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// A connection from pacedDial, over loopback TCP: back-to-back fetch
// requests leave at least the spacing apart and arrive unchanged; other
// requests (a heartbeat, a commit) and a fetch after a quiet moment go at
// once.
func TestFetchRequestsAreSpaced(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 16)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			b := make([]byte, len(frame(0)))
			if _, err := io.ReadFull(c, b); err != nil {
				return
			}
			received <- b
		}
	}()
	const every = 40 * time.Millisecond
	c, err := pacedDial(every)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(apiKey uint16) time.Duration {
		t.Helper()
		start := time.Now()
		f := frame(apiKey)
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
		if got := <-received; string(got) != string(f) {
			t.Fatalf("received %x, sent %x", got, f)
		}
		return time.Since(start)
	}
	if d := send(apiFetch); d >= every {
		t.Fatalf("a first fetch took %v", d)
	}
	if d := send(apiFetch); d < every*3/4 {
		t.Fatalf("a fetch right after another left after %v, want about %v", d, every)
	}
	const heartbeat, commit = 12, 8
	for _, key := range []uint16{heartbeat, commit} {
		if d := send(key); d >= every/2 {
			t.Fatalf("request %d waited %v behind the fetch spacing", key, d)
		}
	}
	time.Sleep(every)
	if d := send(apiFetch); d >= every/2 {
		t.Fatalf("a fetch after a quiet moment waited %v", d)
	}
}
