package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/logs"
)

// An error answer carries its code and a message chosen for the client:
// the wrap chain and an adapter's text stay in the log, which has the
// failure once, with the order number and the request id.
func TestFailShowsOnlyTheClientMessage(t *testing.T) {
	gin.SetMode(gin.TestMode)
	const no, reqID = "01JD0000000000000000000000-7", "req-42"
	mysqlDown := fmt.Errorf("pay order %s: %w", no, fmt.Errorf("mysql pay: %w: %w", order.ErrUnavailable,
		&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}))
	redisDown := fmt.Errorf("find order %s: %w", no, fmt.Errorf("redis EVALSHA: %w: %w", order.ErrUnavailable,
		errors.New("dial tcp 10.0.0.7:7001: connect: connection refused")))
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		code, msg  string
		logLines   int
		leakedText string // must not reach the body
	}{
		{name: "MySQL failure", err: mysqlDown, status: http.StatusServiceUnavailable, code: "UNAVAILABLE",
			msg: "the service cannot take this request right now; retry shortly", logLines: 1, leakedText: "Lock wait"},
		{name: "Redis failure", err: redisDown, status: http.StatusServiceUnavailable, code: "UNAVAILABLE",
			msg: "the service cannot take this request right now; retry shortly", logLines: 1, leakedText: "10.0.0.7"},
		{name: "failure the handler logged", err: logs.Logged(redisDown), status: http.StatusServiceUnavailable,
			code: "UNAVAILABLE", msg: "the service cannot take this request right now; retry shortly", leakedText: "10.0.0.7"},
		{name: "unknown adapter error", err: fmt.Errorf("pay order %s: %w", no, errors.New("gorm: sql: database is closed")),
			status: http.StatusInternalServerError, code: "INTERNAL", msg: "internal error", logLines: 1, leakedText: "gorm"},
		{name: "client message under a wrap", err: fmt.Errorf("pay order %s via mysql 10.0.0.3: %w", no,
			order.Errorf(order.ErrNotPayable, "the payment window has passed")),
			status: http.StatusConflict, code: "ORDER_NOT_PAYABLE", msg: "order is not payable: the payment window has passed",
			leakedText: "10.0.0.3"},
		{name: "sentinel with adapter text", err: fmt.Errorf("%w: redis answered %w", order.ErrNotCancellable,
			errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")),
			status: http.StatusConflict, code: "ORDER_NOT_CANCELLABLE", msg: "the order is not cancellable", leakedText: "WRONGTYPE"},
		{name: "invalid argument", err: fmt.Errorf("place: %w", order.Errorf(order.ErrInvalidArgument, "quantity must be from 1 to %d", 2)),
			status: http.StatusBadRequest, code: "INVALID_ARGUMENT", msg: "invalid argument: quantity must be from 1 to 2", leakedText: "place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logBuf, nil))}
			r := gin.New()
			r.POST("/api/v1/orders/:order_no/pay", func(c *gin.Context) {
				c.Set(ctxRequestID, reqID)
				s.fail(c, tc.err)
			})
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/v1/orders/"+no+"/pay", nil))

			var body apiError
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if w.Code != tc.status || body.Error.Code != tc.code || body.Error.Message != tc.msg {
				t.Fatalf("answer %d %+v, want %d %s %q", w.Code, body.Error, tc.status, tc.code, tc.msg)
			}
			if strings.Contains(w.Body.String(), tc.leakedText) {
				t.Fatalf("body %s shows %q", w.Body, tc.leakedText)
			}

			lines := strings.Split(strings.TrimSpace(logBuf.String()), "\n")
			if logBuf.Len() == 0 {
				lines = nil
			}
			if len(lines) != tc.logLines {
				t.Fatalf("%d log lines, want %d: %s", len(lines), tc.logLines, logBuf.String())
			}
			for _, l := range lines {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatal(err)
				}
				if rec["order_no"] != no || rec["request_id"] != reqID || !strings.Contains(fmt.Sprint(rec["err"]), tc.leakedText) {
					t.Fatalf("log line %s lacks the order number, request id or cause", l)
				}
			}
		})
	}
}

// A domain error's fixed text goes out as bytes encoded once: the same
// status, headers and body the encoder writes for any other message.
func TestFixedErrorBodiesMatchTheEncoder(t *testing.T) {
	gin.SetMode(gin.TestMode)
	answer := func(status int, code, msg string, viaEncoder bool) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		if viaEncoder {
			var b apiError
			b.Error.Code, b.Error.Message = code, msg
			c.AbortWithStatusJSON(status, b)
		} else {
			writeError(c, status, code, msg)
			if !c.IsAborted() {
				t.Errorf("%s: the handler chain was not aborted", code)
			}
		}
		return w
	}
	for _, d := range domainErrors {
		fast, slow := answer(d.status, d.code, d.msg, false), answer(d.status, d.code, d.msg, true)
		if fast.Code != slow.Code || fast.Body.String() != slow.Body.String() ||
			fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") {
			t.Errorf("%s: %d %q %q, want %d %q %q", d.code, fast.Code, fast.Header().Get("Content-Type"), fast.Body,
				slow.Code, slow.Header().Get("Content-Type"), slow.Body)
		}
		if _, ok := fixedBodies[d.code]; !ok {
			t.Errorf("%s has no fixed body", d.code)
		}
	}
	// Another message for the same code is encoded as it is.
	w := answer(http.StatusBadRequest, "INVALID_ARGUMENT", "quantity must be from 1 to 3", false)
	if !strings.Contains(w.Body.String(), "quantity must be from 1 to 3") {
		t.Errorf("a custom message became %s", w.Body)
	}
}
