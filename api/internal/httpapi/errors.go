package httpapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/logs"
	"github.com/seckill/seckill/pkg/order"
)

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(c *gin.Context, status int, code, msg string) {
	var b apiError
	b.Error.Code, b.Error.Message = code, msg
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		if c.Writer.Header().Get("Retry-After") == "" {
			c.Header("Retry-After", "1")
		}
	}
	c.AbortWithStatusJSON(status, b)
}

// fail maps a domain error to its HTTP status and code, in this one place.
// The client reads the code and the message of the *order.Error in err's
// chain, else the code's fixed text: never the wrapped chain, whose
// context and adapter causes are for the log. What is the server's fault
// is logged here, once, with the order number and request id, unless the
// code that handled it logged it already (logs.Logged).
func (s *Server) fail(c *gin.Context, err error) {
	status, code, msg := http.StatusInternalServerError, "INTERNAL", "internal error"
	switch {
	case errors.Is(err, order.ErrInvalidArgument):
		status, code, msg = http.StatusBadRequest, "INVALID_ARGUMENT", "invalid argument"
	case errors.Is(err, order.ErrNotFound):
		status, code, msg = http.StatusNotFound, "NOT_FOUND", "not found"
	case errors.Is(err, order.ErrSoldOut):
		status, code, msg = http.StatusConflict, "SOLD_OUT", "sold out"
	case errors.Is(err, order.ErrAlreadyPurchased):
		status, code, msg = http.StatusConflict, "ALREADY_PURCHASED", "you already hold an order in this activity"
	case errors.Is(err, order.ErrActivityNotActive):
		status, code, msg = http.StatusConflict, "ACTIVITY_NOT_ACTIVE", "the activity is not active"
	case errors.Is(err, order.ErrActivityStarted):
		status, code, msg = http.StatusConflict, "ACTIVITY_STARTED", "the sale has started"
	case errors.Is(err, order.ErrStockLimit):
		status, code, msg = http.StatusConflict, "STOCK_LIMIT", "the item's stock would pass the most it may hold"
	case errors.Is(err, order.ErrNotWarmed):
		status, code, msg = http.StatusConflict, "NOT_WARMED", "the sale's stock is not loaded yet; try again shortly"
	case errors.Is(err, order.ErrNotPayable):
		status, code, msg = http.StatusConflict, "ORDER_NOT_PAYABLE", "the order is not payable"
	case errors.Is(err, order.ErrNotCancellable):
		status, code, msg = http.StatusConflict, "ORDER_NOT_CANCELLABLE", "the order is not cancellable"
	case errors.Is(err, order.ErrKeyReused):
		status, code, msg = http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "the Idempotency-Key was used for a different request"
	case errors.Is(err, order.ErrPaymentRefused):
		status, code, msg = http.StatusUnprocessableEntity, "PAYMENT_REFUSED", "the payment does not fit the order"
	case errors.Is(err, order.ErrUnavailable):
		status, code, msg = http.StatusServiceUnavailable, "UNAVAILABLE", "the service cannot take this request right now; retry shortly"
	}
	if m := order.ClientMessage(err); m != "" && status < 500 {
		msg = m
	}
	if status >= 500 && !logs.IsLogged(err) {
		s.log.Error("request failed", "order_no", c.Param("order_no"), "request_id", c.GetString(ctxRequestID),
			"path", c.FullPath(), "status", status, "err", err)
	}
	writeError(c, status, code, msg)
}
