// Package httpapi is the API's HTTP transport (Gin): authentication, the
// buyer and admin routes, request decoding and the error contract.
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/metrics"
	"github.com/seckill/seckill/pkg/foundation/tracing"
	"github.com/seckill/seckill/pkg/service/draws"
	"github.com/seckill/seckill/pkg/service/lifecycle"
	"github.com/seckill/seckill/pkg/service/placing"
	"github.com/seckill/seckill/pkg/service/sales"
	"github.com/seckill/seckill/pkg/service/waitingroom"
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
	db        *orderdb.DB
	verifier  Verifier
	ready     []Checker
	log       *slog.Logger

	userLimit, ipLimit *limiter

	metrics        *metrics.HTTP
	metricsHandler http.Handler
	routes         map[string]map[string]*metrics.Route // method -> route template -> handle
	unmatched      *metrics.Route

	salePages *salePages
	// drawRecords are the draws published once drawn.
	drawRecords drawRecords
	rooms       *waitingroom.Service

	paymentSecret  []byte
	paymentMetrics *metrics.Payments
	buyerPayOff    bool

	tracer *tracing.Tracer // nil: no spans
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

// New builds the Gin engine with every route.
func New(svc *placing.Service, db *orderdb.DB, verifier Verifier, ready []Checker, log *slog.Logger, opts ...Option) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	stores := db
	if stores == nil {
		stores = &orderdb.DB{} // a server without MySQL: its stores are nil
	}
	s := &Server{intake: svc, db: db, verifier: verifier, ready: ready, log: log,
		lifecycle: &lifecycle.Service{DB: stores.Orders, Payments: stores.Payments, Stock: svc.Reservations, Numbers: svc.Numbers, Log: log}}
	now := time.Now
	if svc.Now != nil {
		now = svc.Now // the shared clock: the page says ENDED when the api refuses orders
	}
	s.draws = &draws.Service{Store: stores.Draws, Now: now}
	s.sales = &sales.Service{Sales: stores.Activities, Warmups: stores.Activities, Restocks: stores.Restocks, Stock: svc.Stock, Closer: s.lifecycle, Now: now, SoldOut: svc.ClearSoldOut,
		PaymentWindow: svc.PaymentWindow, Log: log}
	if svc.Rooms != nil && db != nil {
		s.rooms = waitingroom.New(svc.Rooms, db.Rooms, log, now)
		s.rooms.PaymentWindow, s.rooms.HeldOrder = svc.PaymentWindow, svc.HeldOrder
	}
	s.salePages = &salePages{ttl: ActivityPageTTL, now: now, load: s.loadSalePage, m: map[int64]*salePage{}}
	for _, o := range opts {
		o(s)
	}
	r := gin.New()
	// Client IPs come from the connection; no proxy headers are trusted.
	_ = r.SetTrustedProxies(nil)
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
