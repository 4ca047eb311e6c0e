package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/access"
	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/logs"
)

// apiError is the body of every error response.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(c *gin.Context, status int, code, msg string) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || code == "IN_PROGRESS" {
		if c.Writer.Header().Get("Retry-After") == "" {
			c.Header("Retry-After", "1")
		}
	}
	if f, ok := fixedBodies[code]; ok && f.msg == msg {
		// The same bytes AbortWithStatusJSON would write, encoded once:
		// a sold-out crowd gets this answer thousands of times a second.
		c.Data(status, "application/json; charset=utf-8", f.body)
		c.Abort()
		return
	}
	var b apiError
	b.Error.Code, b.Error.Message = code, msg
	c.AbortWithStatusJSON(status, b)
}

// domainErrors maps each domain error to its HTTP status, code and fixed
// text, in the order fail tests them.
var domainErrors = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	// Before ErrInvalidArgument: a code Normalize refuses is CODE_INVALID.
	{access.ErrCodeRequired, http.StatusForbidden, "CODE_REQUIRED", "this sale takes orders only with an access code"},
	{access.ErrCodeInvalid, http.StatusForbidden, "CODE_INVALID", "the access code is not valid for this sale"},
	{access.ErrCodeUsed, http.StatusConflict, "CODE_USED", "the access code's uses are all taken"},
	{access.ErrTooManyGuesses, http.StatusTooManyRequests, "TOO_MANY_GUESSES", "too many invalid access codes; try again later"},
	{order.ErrInvalidArgument, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid argument"},
	{order.ErrNotFound, http.StatusNotFound, "NOT_FOUND", "not found"},
	{order.ErrSoldOut, http.StatusConflict, "SOLD_OUT", "sold out"},
	{order.ErrAlreadyPurchased, http.StatusConflict, "ALREADY_PURCHASED", "you already hold an order in this activity"},
	{order.ErrActivityNotActive, http.StatusConflict, "ACTIVITY_NOT_ACTIVE", "the activity is not active"},
	{order.ErrActivityStarted, http.StatusConflict, "ACTIVITY_STARTED", "the sale has started"},
	{activity.ErrNoRoom, http.StatusConflict, "NO_WAITING_ROOM", "the sale has no waiting room"},
	{activity.ErrSettingLocked, http.StatusConflict, "SETTING_LOCKED", "the sale's keys in Redis depend on this setting; it cannot change now"},
	{activity.ErrItemInAnotherActivity, http.StatusConflict, "ITEM_IN_ANOTHER_SALE", "another sale of one of the sale's items overlaps its window"},
	{order.ErrStockLimit, http.StatusConflict, "STOCK_LIMIT", "the item's stock would pass the most it may hold"},
	{order.ErrNotAdmitted, http.StatusForbidden, "NOT_ADMITTED", "this sale has a waiting room: order with the admission its queue gives you"},
	{order.ErrDrawSale, http.StatusConflict, "DRAW_SALE", "this sale is a draw: enter it at /api/v1/activities/{id}/entries"},
	{order.ErrNotWarmed, http.StatusConflict, "NOT_WARMED", "the sale's stock is not loaded yet; try again shortly"},
	{order.ErrNotPayable, http.StatusConflict, "ORDER_NOT_PAYABLE", "the order is not payable"},
	{order.ErrNotCancellable, http.StatusConflict, "ORDER_NOT_CANCELLABLE", "the order is not cancellable"},
	{access.ErrCodesExist, http.StatusConflict, "CODES_EXIST", "some of the codes are the sale's already; none was added"},
	{order.ErrInProgress, http.StatusConflict, "IN_PROGRESS", "a request with this Idempotency-Key is still being placed; send it again in a second"},
	{order.ErrKeyReused, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", "the Idempotency-Key was used for a different request"},
	{order.ErrPaymentRefused, http.StatusUnprocessableEntity, "PAYMENT_REFUSED", "the payment does not fit the order"},
	{order.ErrUnavailable, http.StatusServiceUnavailable, "UNAVAILABLE", "the service cannot take this request right now; retry shortly"},
}

// fixedBody is the encoded body of a domain error's fixed text.
type fixedBody struct {
	msg  string
	body []byte
}

// fixedBodies holds the fixedBody of each domain error's code.
var fixedBodies = func() map[string]fixedBody {
	m := map[string]fixedBody{}
	for _, d := range domainErrors {
		var b apiError
		b.Error.Code, b.Error.Message = d.code, d.msg
		body, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		m[d.code] = fixedBody{d.msg, body}
	}
	return m
}()

// fail maps a domain error to its HTTP status and code, in this one place.
// The client reads the code and the message of the *order.Error in err's
// chain, else the code's fixed text: never the wrapped chain, whose
// context and adapter causes are for the log. What is the server's fault
// is logged here, once, with the order number and request id, unless the
// code that handled it logged it already (logs.Logged).
func (s *Server) fail(c *gin.Context, err error) {
	status, code, msg := http.StatusInternalServerError, "INTERNAL", "internal error"
	for _, d := range domainErrors {
		if errors.Is(err, d.err) {
			status, code, msg = d.status, d.code, d.msg
			break
		}
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
