package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/seckill/seckill/pkg/adapter/auth"
)

// tokens holds buyers' bearer tokens minted before the load starts, so
// signing them costs the load generator nothing while it runs. Users
// base..base+n-1 are pre-minted; any other user is minted on demand.
type tokens struct {
	secret  []byte
	base    int64
	pre     []string
	subject func(int64) string
}

// decimalSubject is user's subject by default: its number.
func decimalSubject(user int64) string { return strconv.FormatInt(user, 10) }

// uuidSubject is user's subject with --uuid-subjects: a UUID (version 4
// layout) derived from the number, as Keycloak or Okta name their users,
// the same for the same user in every run.
func uuidSubject(user int64) string {
	h := sha256.Sum256([]byte("seckill-bench-buyer:" + strconv.FormatInt(user, 10)))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// tokenTTL outlives any run.
const tokenTTL = 6 * time.Hour

// mintTokens signs tokens for users base..base+n-1 on every CPU, each with
// subject(user) as its subject (decimalSubject when nil).
func mintTokens(secret []byte, base, n int64, subject func(int64) string) (*tokens, error) {
	if subject == nil {
		subject = decimalSubject
	}
	t := &tokens{secret: secret, base: base, pre: make([]string, n), subject: subject}
	workers := int64(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				tok, err := auth.Mint(secret, subject(base+i), "", tokenTTL)
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
	tok, _ := auth.Mint(t.secret, t.subject(user), "", tokenTTL) // subjects are valid
	return tok
}

// subject is how the run names its buyers in their tokens.
func (e *env) subject() func(int64) string {
	if e.opts.uuidSubjects {
		return uuidSubject
	}
	return decimalSubject
}

// mintTokens is mintTokens with a progress line.
func (e *env) mintTokens(scenario string, base, n int64) (*tokens, error) {
	start := time.Now()
	t, err := mintTokens(e.secret, base, n, e.subject())
	if err == nil && n >= 10000 {
		e.meter.say("%s: minted %d buyer tokens in %s", scenario, n, time.Since(start).Round(time.Millisecond))
	}
	return t, err
}
