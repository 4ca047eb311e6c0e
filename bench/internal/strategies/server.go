package strategies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Server serves one strategy over HTTP on a loopback port, with the same
// request shape and the same per-request work as the real API (bearer JWT,
// Idempotency-Key header, JSON body), so the comparison is like for like.
type Server struct {
	srv *http.Server
}

type placeBody struct {
	ActivityID int64 `json:"activity_id"`
	Quantity   *int  `json:"quantity"`
}

// Serve starts s on addr ("127.0.0.1:0" picks a free port): POST
// /api/v1/orders, and GET /healthz.
func Serve(s Strategy, verifier *auth.Verifier, addr string) (*Server, error) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	var seq atomic.Int64
	fail := func(c *gin.Context, status int, code string) {
		c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": strings.ToLower(code)}})
	}
	r.POST("/api/v1/orders", func(c *gin.Context) {
		tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !ok {
			fail(c, http.StatusUnauthorized, "UNAUTHENTICATED")
			return
		}
		claims, err := verifier.Verify(tok)
		if err != nil {
			fail(c, http.StatusUnauthorized, "UNAUTHENTICATED")
			return
		}
		if !order.ValidIdempotencyKey(c.GetHeader("Idempotency-Key")) {
			fail(c, http.StatusBadRequest, "INVALID_ARGUMENT")
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, 4<<10))
		if err != nil {
			fail(c, http.StatusBadRequest, "INVALID_ARGUMENT")
			return
		}
		var b placeBody
		if err := jsonDecode(raw, &b); err != nil || b.ActivityID <= 0 {
			fail(c, http.StatusBadRequest, "INVALID_ARGUMENT")
			return
		}
		qty := 1
		if b.Quantity != nil {
			qty = *b.Quantity
		}
		// The seed's strategies keep numeric buyers (the bench mints them).
		user, ok := order.NumericUserID(claims.UserID)
		if !ok {
			fail(c, http.StatusBadRequest, "INVALID_ARGUMENT")
			return
		}
		switch err := s.Place(c.Request.Context(), user, qty); {
		case err == nil:
			c.JSON(http.StatusAccepted, gin.H{"order_no": fmt.Sprintf("CMP-%d", seq.Add(1)), "status": "CREATED"})
		case errors.Is(err, ErrSoldOut):
			fail(c, http.StatusConflict, "SOLD_OUT")
		case errors.Is(err, ErrAlready):
			fail(c, http.StatusConflict, "ALREADY_PURCHASED")
		case errors.Is(err, ErrBusy):
			fail(c, http.StatusServiceUnavailable, "UNAVAILABLE")
		default:
			fail(c, http.StatusInternalServerError, "INTERNAL")
		}
	})
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &Server{srv: srv}, nil
}

// Close stops the server.
func (s *Server) Close(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// jsonDecode decodes one JSON object strictly, as the real API does.
func jsonDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
