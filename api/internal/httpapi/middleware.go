package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
)

// The middlewares every request passes (observe when metrics are on,
// recover, requestID) and authenticate on the buyer and admin routes; the
// rate limits are in ratelimit.go, tracing in tracing.go.

// resolveRoutes makes the metrics handle of every route once, so a request
// finds its own with two map reads.
func (s *Server) resolveRoutes(routes gin.RoutesInfo) {
	if s.metrics == nil {
		return
	}
	s.routes = map[string]map[string]*metrics.Route{}
	for _, ri := range routes {
		if s.routes[ri.Method] == nil {
			s.routes[ri.Method] = map[string]*metrics.Route{}
		}
		s.routes[ri.Method][ri.Path] = s.metrics.Route(ri.Method, ri.Path)
	}
	// The method of a request no route matched is whatever the client
	// sent, so it is not a label value.
	s.unmatched = s.metrics.Route("any", metrics.Unmatched)
}

// observe records the request's route template (never the raw path, which
// holds order numbers), status and latency.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	s.metrics.Start()
	c.Next()
	rt := s.routes[c.Request.Method][c.FullPath()]
	if rt == nil {
		rt = s.unmatched
	}
	if s.tracer.On() {
		// The latency carries the trace id as an exemplar.
		rt.ObserveTrace(c.Writer.Status(), time.Since(start), tracing.TraceID(c.Request.Context()))
		return
	}
	rt.Observe(c.Writer.Status(), time.Since(start))
}

// recover answers 500 INTERNAL for a handler that panicked (but for
// http.ErrAbortHandler, a connection dropped on purpose), and logs the
// panic once, with the request id.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				// The handler drops the connection on purpose (an answer
				// cut short): net/http closes it without a word.
				panic(v)
			}
			s.log.Error("panic in handler", "request_id", c.GetString(ctxRequestID), "panic", fmt.Sprint(v))
			writeError(c, http.StatusInternalServerError, "INTERNAL", "internal error")
		}
	}()
	c.Next()
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID accepts a sane incoming X-Request-ID or makes one, and returns
// it in the response.
func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-ID")
	if !requestIDRE.MatchString(id) {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	c.Set(ctxRequestID, id)
	c.Header("X-Request-ID", id)
	c.Next()
}

// authenticate answers 401 for a request without a valid bearer token and,
// on the admin routes, 403 for a buyer's; it keeps the token's claims for
// the handler (claimsOf).
func (s *Server) authenticate(admin bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		h := c.GetHeader("Authorization")
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			writeError(c, http.StatusUnauthorized, "UNAUTHENTICATED", "a bearer token is required")
			return
		}
		claims, err := s.verifier.Verify(strings.TrimSpace(tok))
		if err != nil {
			writeError(c, http.StatusUnauthorized, "UNAUTHENTICATED", "the token is not valid")
			return
		}
		if admin && !claims.Admin {
			writeError(c, http.StatusForbidden, "FORBIDDEN", "this route is for operators")
			return
		}
		c.Set(ctxClaims, claims)
		c.Next()
	}
}

// claimsOf is whom the verified token names, set by authenticate.
func claimsOf(c *gin.Context) order.Identity { return c.MustGet(ctxClaims).(order.Identity) }
