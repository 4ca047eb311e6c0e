package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/foundation/logs"
)

// statusView is the body of a pay or cancel answer.
type statusView struct {
	OrderNo string       `json:"order_no"`
	Status  order.Status `json:"status"`
}

// payOrder lets the buyer mark their order paid: a stand-in for the payment
// provider's notification, for development (WithBuyerPay).
func (s *Server) payOrder(c *gin.Context) {
	if s.buyerPayOff {
		writeError(c, http.StatusForbidden, "FORBIDDEN", "orders are paid through the payment provider on this server; the buyer pay endpoint is for development (SECKILL_BUYER_PAY)")
		return
	}
	no := c.Param("order_no")
	if !order.ValidOrderNo(no) {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	o, err := s.lifecycle.Pay(s.logContext(c), claimsOf(c).UserID, no)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, statusView{OrderNo: o.OrderNo, Status: o.Status})
}

func (s *Server) cancelOrder(c *gin.Context) {
	no := c.Param("order_no")
	if !order.ValidOrderNo(no) {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	o, err := s.lifecycle.Cancel(s.logContext(c), claimsOf(c).UserID, no)
	if err != nil {
		s.fail(c, err)
		return
	}
	// The unit is back: this instance stops answering SOLD_OUT from its
	// flag at once (other instances notice within placing.SoldOutTTL).
	s.intake.ClearSoldOut(o.ItemID)
	c.JSON(http.StatusOK, statusView{OrderNo: o.OrderNo, Status: o.Status})
}

// logContext is the request's context carrying its request id, for the
// lifecycle's log lines.
func (s *Server) logContext(c *gin.Context) context.Context {
	return logs.WithRequestID(c.Request.Context(), c.GetString(ctxRequestID))
}
