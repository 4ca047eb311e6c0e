package main

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/auth"
)

// tokens holds buyers' bearer tokens minted before the load starts, so
// signing them costs the load generator nothing while it runs. Users
// base..base+n-1 are pre-minted; any other user is minted on demand.
type tokens struct {
	secret []byte
	base   int64
	pre    []string
}

// tokenTTL outlives any run.
const tokenTTL = 6 * time.Hour

// mintTokens signs tokens for users base..base+n-1 on every CPU.
func mintTokens(secret []byte, base, n int64) (*tokens, error) {
	t := &tokens{secret: secret, base: base, pre: make([]string, n)}
	workers := int64(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				tok, err := auth.Mint(secret, base+i, "", tokenTTL)
				if err != nil {
					errs[w] = fmt.Errorf("mint token for user %d: %w", base+i, err)
					return
				}
				t.pre[i] = tok
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// For returns user's token.
func (t *tokens) For(user int64) string {
	if i := user - t.base; i >= 0 && i < int64(len(t.pre)) {
		return t.pre[i]
	}
	tok, _ := auth.Mint(t.secret, user, "", tokenTTL) // user ids are positive
	return tok
}

// mintTokens is mintTokens with a progress line.
func (e *env) mintTokens(scenario string, base, n int64) (*tokens, error) {
	start := time.Now()
	t, err := mintTokens(e.secret, base, n)
	if err == nil && n >= 10000 {
		e.meter.say("%s: minted %d buyer tokens in %s", scenario, n, time.Since(start).Round(time.Millisecond))
	}
	return t, err
}
