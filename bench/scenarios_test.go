package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/seckill/seckill/bench/internal/load"
)

func TestSpread(t *testing.T) {
	tests := []struct {
		name        string
		conns, apis int
		shares      []int
	}{
		{name: "one API takes every connection", conns: 500, apis: 1, shares: []int{500}},
		{name: "even split", conns: 500, apis: 2, shares: []int{250, 250}},
		{name: "odd count: the first API gets the extra one", conns: 5, apis: 2, shares: []int{3, 2}},
		{name: "uneven over three", conns: 7, apis: 3, shares: []int{3, 2, 2}},
		{name: "one connection each", conns: 8, apis: 8, shares: []int{1, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shares := make([]int, tt.apis)
			for i := range shares {
				shares[i] = share(i, tt.apis, tt.conns)
			}
			if !reflect.DeepEqual(shares, tt.shares) {
				t.Fatalf("shares = %v, want %v", shares, tt.shares)
			}
			// Every worker gets one slot of one API, round-robin, and no
			// two workers share a slot.
			used := map[[2]int]int{}
			for w := range tt.conns {
				api, slot := spread(w, tt.apis)
				if api != w%tt.apis {
					t.Errorf("worker %d talks to API %d, want %d", w, api, w%tt.apis)
				}
				if slot < 0 || slot >= shares[api] {
					t.Errorf("worker %d has slot %d of API %d, which has %d", w, slot, api, shares[api])
				}
				if prev, ok := used[[2]int{api, slot}]; ok {
					t.Errorf("workers %d and %d share slot %d of API %d", prev, w, slot, api)
				}
				used[[2]int{api, slot}] = w
			}
		})
	}
}

// recorder is a stand-in API that answers 202 and records which
// Idempotency-Keys and client connections reached it.
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	keys  []string
	conns map[string]bool
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{conns: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.conns[req.RemoteAddr] = true
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, `{"order_no":%q}`, req.Header.Get("Idempotency-Key"))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func TestBuyersSpreadOverAPIs(t *testing.T) {
	for _, client := range []string{"raw", "nethttp"} {
		t.Run(client, func(t *testing.T) {
			const workers, perWorker = 5, 4
			apis := []*recorder{newRecorder(t), newRecorder(t)}
			e := &env{opts: options{client: client}}
			tk, err := mintTokens([]byte(secret), 1, workers, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := e.newBuyers([]string{apis[0].srv.URL, apis[1].srv.URL}, workers, 1, 1, tk)
			if err != nil {
				t.Fatal(err)
			}
			// Each worker sends perWorker requests, concurrently, as a load does.
			var wg sync.WaitGroup
			outcomes := make([][]load.Outcome, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWorker {
						outcomes[w] = append(outcomes[w], b.place(context.Background(), w, 1+int64(w), fmt.Sprintf("w%d-%d", w, i)))
					}
				}()
			}
			wg.Wait()
			b.close()
			for w, got := range outcomes {
				for _, o := range got {
					if o != load.Accepted {
						t.Fatalf("worker %d got %v", w, o)
					}
				}
			}
			// Each worker's requests all reached API w mod 2.
			served := map[string]int{}
			for i, a := range apis {
				for _, k := range a.keys {
					var w, seq int
					if _, err := fmt.Sscanf(k, "w%d-%d", &w, &seq); err != nil {
						t.Fatalf("key %q: %v", k, err)
					}
					if w%2 != i {
						t.Errorf("worker %d's request %s reached API %d, want %d", w, k, i, w%2)
					}
					served[k]++
				}
			}
			if len(served) != workers*perWorker {
				t.Errorf("the APIs saw %d distinct requests, want %d", len(served), workers*perWorker)
			}
			per := b.perAPI()
			if want := []int64{int64(len(apis[0].keys)), int64(len(apis[1].keys))}; !reflect.DeepEqual(per, want) {
				t.Errorf("perAPI = %v, the APIs saw %v", per, want)
			}
			if per[0] == 0 || per[1] == 0 {
				t.Errorf("an API got no requests: %v", per)
			}
			if client == "raw" {
				// One keep-alive connection per worker: API 0 has workers
				// 0, 2, 4 and API 1 has workers 1, 3.
				if n0, n1 := len(apis[0].conns), len(apis[1].conns); n0 != 3 || n1 != 2 {
					t.Errorf("connections per API = %d, %d; want 3, 2", n0, n1)
				}
			}
			if got := len(b.collected()); got != workers*perWorker {
				t.Errorf("%d answers collected, want %d", got, workers*perWorker)
			}
		})
	}
}

func TestBuyersOneAPI(t *testing.T) {
	api := newRecorder(t)
	e := &env{opts: options{client: "raw"}}
	tk, err := mintTokens([]byte(secret), 1, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.newBuyers([]string{api.srv.URL}, 3, 1, 1, tk)
	if err != nil {
		t.Fatal(err)
	}
	for w := range 3 {
		for i := range 3 {
			b.place(context.Background(), w, 1+int64(w), fmt.Sprintf("w%d-%d", w, i))
		}
	}
	b.close()
	if len(api.keys) != 9 || len(api.conns) != 3 {
		t.Errorf("the API saw %d requests on %d connections, want 9 on 3", len(api.keys), len(api.conns))
	}
	if got := b.perAPI(); !reflect.DeepEqual(got, []int64{9}) {
		t.Errorf("perAPI = %v, want [9]", got)
	}
}
