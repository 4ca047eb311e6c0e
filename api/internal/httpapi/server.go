// Package httpapi is the API's HTTP transport (Gin): authentication, the
// buyer and admin routes, request decoding and the error contract.
package httpapi

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/service/codes"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/sales"
	"github.com/seckill/seckill/pkg/service/waitingroom"
	"github.com/seckill/seckill/pkg/service/webhooks"
)

const (
	ctxRequestID = "request_id"
	ctxClaims    = "claims"
	// MaxBody bounds every request body.
	MaxBody = 4 << 10
)

// Server holds the handlers' dependencies.
type Server struct {
	intake    *placing.Service
	lifecycle *lifecycle.Service
	sales     *sales.Service
	draws     *draws.Service
	verifier  Verifier
	ready     []Checker
	log       *slog.Logger

	userLimit, ipLimit *limiter
	// addrLimit and deny guard joins, draw entries and orders by client
	// address; proxies and ipHeader say how that address is read.
	addrLimit *limiter
	deny      *denyList
	proxies   []netip.Prefix
	ipHeader  string

	metrics        *metrics.HTTP
	metricsHandler http.Handler
	routes         map[string]map[string]*metrics.Route // method -> route template -> handle
	unmatched      *metrics.Route

	salePages *salePages
	rooms     *waitingroom.Service
	webhooks  *webhooks.Service
	codes     *codes.Service

	paymentSecret  []byte
	paymentMetrics *metrics.Payments
	buyerPayOff    bool

	tracer *tracing.Tracer // nil: no spans

	console Console
}

// Verifier checks a bearer token and says whom it names (*auth.Verifier);
// an error is a token to refuse.
type Verifier interface {
	Verify(token string) (order.Identity, error)
}

// Option configures the server.
type Option func(*Server)

// WithRateLimits turns on the per-user and per-IP token buckets.
func WithRateLimits(l RateLimits) Option {
	return func(s *Server) {
		s.userLimit, s.ipLimit = newLimiter(l.PerUser), newLimiter(l.PerIP)
	}
}

// WithMetrics records every request in m (by route template, method and
// status) and serves GET /metrics with h.
func WithMetrics(m *metrics.HTTP, h http.Handler) Option {
	return func(s *Server) { s.metrics, s.metricsHandler = m, h }
}

// Services are the use cases the handlers call besides placing, built by
// the wiring over the stores. Rooms is nil when the api runs no waiting
// rooms.
type Services struct {
	Lifecycle *lifecycle.Service
	Sales     *sales.Service
	Draws     *draws.Service
	Rooms     *waitingroom.Service
	Webhooks  *webhooks.Service
	Codes     *codes.Service
}

// New builds the Gin engine with every route.
func New(svc *placing.Service, services Services, verifier Verifier, ready []Checker, log *slog.Logger, opts ...Option) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{intake: svc, verifier: verifier, ready: ready, log: log,
		lifecycle: services.Lifecycle, sales: services.Sales, draws: services.Draws, rooms: services.Rooms,
		webhooks: services.Webhooks, codes: services.Codes}
	now := time.Now
	if svc.Now != nil {
		now = svc.Now // the shared clock: the page says ENDED when the api refuses orders
	}
	s.salePages = &salePages{ttl: ActivityPageTTL, now: now, load: s.loadSalePage, m: map[int64]*salePage{}}
	for _, o := range opts {
		o(s)
	}
	r := gin.New()
	s.trustProxies(r)
	if s.tracer.On() {
		r.Use(s.trace)
	}
	if s.metrics != nil {
		r.Use(s.observe)
	}
	r.Use(s.recover, s.requestID)
	s.addRoutes(r)
	s.resolveRoutes(r.Routes())
	return r
}
