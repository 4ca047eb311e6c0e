// Package httpapi is the API's HTTP transport (Gin): authentication, the
// buyer and admin routes, request decoding and the error contract.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/api/internal/intake"
	"github.com/seckill/seckill/pkg/auth"
	"github.com/seckill/seckill/pkg/lifecycle"
	"github.com/seckill/seckill/pkg/metrics"
	"github.com/seckill/seckill/pkg/order"
	"github.com/seckill/seckill/pkg/orderdb"
	"github.com/seckill/seckill/pkg/tracing"
)

const (
	ctxRequestID = "request_id"
	ctxClaims    = "claims"
	// MaxBody bounds every request body.
	MaxBody = 4 << 10
)

// Checker reports whether one dependency is reachable.
type Checker struct {
	Name  string
	Check func(context.Context) error
}

// Server holds the handlers' dependencies.
type Server struct {
	intake    *intake.Service
	lifecycle *lifecycle.Service
	db        *orderdb.DB
	verifier  *auth.Verifier
	ready     []Checker
	log       *slog.Logger

	userLimit, ipLimit *limiter

	metrics        *metrics.HTTP
	metricsHandler http.Handler
	routes         map[string]map[string]*metrics.Route // method -> route template -> handle
	unmatched      *metrics.Route

	salePages *salePages

	paymentSecret  []byte
	paymentMetrics *metrics.Payments
	buyerPayOff    bool

	tracer *tracing.Tracer // nil: no spans
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
func New(svc *intake.Service, db *orderdb.DB, verifier *auth.Verifier, ready []Checker, log *slog.Logger, opts ...Option) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{intake: svc, db: db, verifier: verifier, ready: ready, log: log,
		lifecycle: &lifecycle.Service{DB: db, Stock: svc.Stock, Numbers: svc.Numbers, Log: log}}
	now := time.Now
	if svc.Now != nil {
		now = svc.Now // the shared clock: the page says ENDED when the api refuses orders
	}
	s.salePages = &salePages{ttl: SalePageTTL, now: now, load: s.loadSalePage, m: map[int64]*salePage{}}
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
	r.HandleMethodNotAllowed = true
	r.NoRoute(func(c *gin.Context) { writeError(c, http.StatusNotFound, "NOT_FOUND", "no such route") })
	r.NoMethod(func(c *gin.Context) {
		writeError(c, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method not allowed")
	})

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)
	if s.metricsHandler != nil {
		r.GET("/metrics", gin.WrapH(s.metricsHandler))
	}

	// The sale page needs no token: the crowd refreshes it before the drop.
	r.GET("/api/v1/activities/:id", s.limitIP, s.salePageView)

	// Signed by the payment provider, not by a buyer's token.
	r.POST("/payments/v1/notifications", s.paymentNotification)

	buyer := r.Group("/api/v1", s.limitIP, s.authenticate(false), s.limitUser)
	buyer.GET("/orders", s.listOrders)
	buyer.POST("/orders", s.placeOrder)
	buyer.GET("/orders/:order_no", s.getOrder)
	buyer.POST("/orders/:order_no/pay", s.payOrder)
	buyer.POST("/orders/:order_no/cancel", s.cancelOrder)

	admin := r.Group("/admin/v1", s.limitIP, s.authenticate(true))
	admin.POST("/items", s.createItem)
	admin.GET("/items/:id/stock", s.itemStock)
	admin.POST("/items/:id/restock", s.restock)
	admin.POST("/activities", s.createActivity)
	admin.POST("/activities/:id/warmup", s.warmup)
	admin.PATCH("/activities/:id", s.patchActivity)
	admin.POST("/activities/:id/end", s.endActivity)
	admin.POST("/activities/:id/cancel", s.cancelActivity)
	admin.GET("/activities/:id/summary", s.activitySummary)
	s.resolveRoutes(r.Routes())
	return r
}

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

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
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

func claimsOf(c *gin.Context) auth.Claims { return c.MustGet(ctxClaims).(auth.Claims) }

// decode reads a JSON object into v: at most MaxBody bytes, no unknown
// fields, nothing after the object.
func decode(c *gin.Context, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errTooLarge
		}
		return order.Errorf(order.ErrInvalidArgument, "cannot read body")
	}
	return DecodeJSON(body, v)
}

var errTooLarge = errors.New("body too large")

// DecodeJSON strictly decodes one JSON object from body into v. The order
// body takes a fast path first (decodePlaceOrderFast).
func DecodeJSON(body []byte, v any) error {
	if b, ok := v.(*PlaceOrderBody); ok && decodePlaceOrderFast(body, b) {
		return nil
	}
	return decodeStrict(body, v)
}

// decodeStrict decodes with encoding/json and no unknown fields, nothing
// after the object, no field in another case or twice.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return order.Errorf(order.ErrInvalidArgument, "body is not a valid JSON object of the expected shape: %s", jsonProblem(err))
	}
	if dec.More() {
		return order.Errorf(order.ErrInvalidArgument, "unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return order.Errorf(order.ErrInvalidArgument, "unexpected data after the JSON object")
	}
	return exactKeys(body, v)
}

// exactKeys refuses what encoding/json lets through: field names in another
// case ("ACTIVITY_ID") and a field given twice.
func exactKeys(body []byte, v any) error {
	allowed := fieldNames(reflect.TypeOf(v))
	if allowed == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		if !allowed[key] {
			return order.Errorf(order.ErrInvalidArgument, "unknown field %q", strings.ToValidUTF8(key, ""))
		}
		if seen[key] {
			return order.Errorf(order.ErrInvalidArgument, "field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

var fieldCache sync.Map // reflect.Type -> map[string]bool

// fieldNames returns the JSON names of a struct pointer's fields.
func fieldNames(t reflect.Type) map[string]bool {
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	st := t.Elem()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = st.Field(i).Name
		}
		if name != "-" {
			m[name] = true
		}
	}
	fieldCache.Store(t, m)
	return m
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q must be %s", te.Field, te.Type)
	}
	msg := err.Error()
	if len(msg) > 120 {
		// Cut on a character boundary: the message goes to the client.
		msg = strings.ToValidUTF8(msg[:120], "")
	}
	return msg
}

func (s *Server) decodeOr400(c *gin.Context, v any) bool {
	err := decode(c, v)
	if errors.Is(err, errTooLarge) {
		writeError(c, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("the body must be at most %d bytes", MaxBody))
		return false
	}
	if err != nil {
		s.fail(c, err)
		return false
	}
	return true
}

// PlaceOrderBody is the body of POST /api/v1/orders.
type PlaceOrderBody struct {
	ActivityID int64 `json:"activity_id"`
	// Quantity left out is 1; null is refused.
	Quantity optional[int] `json:"quantity,omitzero"`
}

// Validate fills defaults and checks ranges that need no activity.
func (b *PlaceOrderBody) Validate() (int, error) {
	if b.ActivityID <= 0 {
		return 0, order.Errorf(order.ErrInvalidArgument, "activity_id must be a positive integer")
	}
	if err := refuseNull(field{"quantity", b.Quantity}); err != nil {
		return 0, err
	}
	q := 1
	if b.Quantity.Set {
		q = b.Quantity.Value
	}
	if q < 1 || q > order.MaxQuantity {
		return 0, order.Errorf(order.ErrInvalidArgument, "quantity must be a positive integer")
	}
	return q, nil
}

// idempotencyKeyOr400 returns the request's Idempotency-Key header, or
// answers 400 when it is missing or malformed.
func idempotencyKeyOr400(c *gin.Context) (string, bool) {
	key := c.GetHeader("Idempotency-Key")
	if !order.ValidIdempotencyKey(key) {
		writeError(c, http.StatusBadRequest, "INVALID_ARGUMENT", "the Idempotency-Key header is required: 1-64 characters of A-Z a-z 0-9 _ -")
		return "", false
	}
	return key, true
}

func (s *Server) placeOrder(c *gin.Context) {
	key, ok := idempotencyKeyOr400(c)
	if !ok {
		return
	}
	var body PlaceOrderBody
	if !s.decodeOr400(c, &body) {
		return
	}
	q, err := body.Validate()
	if err != nil {
		s.fail(c, err)
		return
	}
	user := claimsOf(c).UserID
	placed, err := s.intake.Place(c.Request.Context(), intake.PlaceRequest{
		UserID: user, ActivityID: body.ActivityID, Quantity: q,
		IdempotencyKey: key, RequestID: c.GetString(ctxRequestID),
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Location", "/api/v1/orders/"+placed.OrderNo)
	c.JSON(http.StatusAccepted, placedBody{OrderNo: placed.OrderNo, Status: placed.Status})
}

// placedBody is the answer to an accepted order (a struct, not a map: the
// encoder needs no reflection over map keys, and writes the same bytes).
type placedBody struct {
	OrderNo string       `json:"order_no"`
	Status  order.Status `json:"status"`
}

// OrderView is the body of GET /api/v1/orders/{order_no}.
type OrderView struct {
	OrderNo string       `json:"order_no"`
	Status  order.Status `json:"status"`
	// ActivityID and Quantity are left out (zero) only for a PENDING
	// order whose reservation Redis lost before the consumer wrote it:
	// the api then knows the order by its signed number alone.
	ActivityID    int64  `json:"activity_id,omitempty"`
	ItemID        int64  `json:"item_id"`
	Quantity      int    `json:"quantity,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
	// UnitPrice, Amount and Currency are what the order cost when it was
	// written; left out for a PENDING order and for orders without a price.
	UnitPrice *int64    `json:"unit_price,omitempty"`
	Amount    *int64    `json:"amount,omitempty"`
	Currency  string    `json:"currency,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// orderView is the answer's view of o.
func orderView(o order.Order) OrderView {
	v := OrderView{
		OrderNo: o.OrderNo, Status: o.Status, ActivityID: o.ActivityID, ItemID: o.ItemID,
		Quantity: o.Quantity, FailureReason: o.FailureReason,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
	if o.UnitPrice.Priced() && o.Amount.Priced() {
		unit, amount := o.UnitPrice.Amount, o.Amount.Amount
		v.UnitPrice, v.Amount, v.Currency = &unit, &amount, o.UnitPrice.Currency
	}
	return v
}

func (s *Server) getOrder(c *gin.Context) {
	no := c.Param("order_no")
	if !order.ValidOrderNo(no) {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	o, err := s.intake.Status(c.Request.Context(), claimsOf(c).UserID, no)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, orderView(o))
}

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{}
	var down []string
	for _, ch := range s.ready {
		if err := ch.Check(ctx); err != nil {
			checks[ch.Name] = "unreachable"
			down = append(down, ch.Name)
		} else {
			checks[ch.Name] = "ok"
		}
	}
	if len(down) > 0 {
		c.Header("Retry-After", "1")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "checks": checks,
			"error": gin.H{"code": "UNAVAILABLE", "message": "unreachable: " + strings.Join(down, ", ")}})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok", "checks": checks})
}

func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return 0, false
	}
	return id, true
}
