package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// RateLimits configures the token buckets. They are per API instance: with
// N instances behind a balancer a client gets up to N times the rate, which
// bounds abuse without a Redis round trip on the hot path.
type RateLimits struct {
	// PerUser is the sustained rate of buyer requests per user per second
	// (burst twice that); 0 disables it.
	PerUser float64
	// PerIP is the sustained rate of requests per client address (an IPv4
	// address or an IPv6 /64) per second (burst twice that); 0 disables it.
	PerIP float64
}

// limiter keeps one token bucket per key and forgets idle ones: a bucket
// left alone for burst/rate is full again, the same as a new one, so it can
// be dropped; sweeping that often keeps the map to the keys seen in the
// last few seconds, even when a flash sale brings a new buyer per request.
type limiter struct {
	rate  rate.Limit
	burst int
	idle  time.Duration

	mu      sync.Mutex
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(perSecond float64) *limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := max(1, int(math.Ceil(2*perSecond)))
	refill := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &limiter{rate: rate.Limit(perSecond), burst: burst, idle: max(time.Second, refill),
		buckets: map[string]*bucket{}, sweep: time.Now()}
}

// allow takes a token for key, or returns how long until one is there.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweep) > l.idle {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > l.idle {
				delete(l.buckets, k)
			}
		}
		l.sweep = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func rateLimited(c *gin.Context, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	c.Header("Retry-After", strconv.Itoa(max(1, secs)))
	writeError(c, http.StatusTooManyRequests, "RATE_LIMITED", "too many requests; slow down")
}

// limitIP applies the per-client-address bucket (the connection's
// address, or a trusted proxy's forwarding header's; see addrKey).
func (s *Server) limitIP(c *gin.Context) {
	if s.ipLimit != nil {
		if ok, wait := s.ipLimit.allow(addrKey(c), time.Now()); !ok {
			rateLimited(c, wait)
			return
		}
	}
	c.Next()
}

// limitUser applies the per-user bucket; it runs after authentication.
func (s *Server) limitUser(c *gin.Context) {
	if s.userLimit != nil {
		if ok, wait := s.userLimit.allow(claimsOf(c).UserID, time.Now()); !ok {
			rateLimited(c, wait)
			return
		}
	}
	c.Next()
}
