package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/service/placing"
)

// PlaceOrderBody is the body of POST /api/v1/orders.
type PlaceOrderBody struct {
	ActivityID int64 `json:"activity_id"`
	// ItemID is the item bought (a size): required for a sale of several
	// items; left out for a sale of one. null is refused.
	ItemID optional[int64] `json:"item_id,omitzero"`
	// Quantity left out is 1; null is refused.
	Quantity optional[int] `json:"quantity,omitzero"`
	// AccessCode is the buyer's presale code, as typed (hyphens, spaces
	// and case do not matter); a sale open to everyone ignores it.
	AccessCode string `json:"access_code,omitempty"`
}

// Validate fills defaults and checks ranges that need no activity.
func (b *PlaceOrderBody) Validate() (int, error) {
	if b.ActivityID <= 0 {
		return 0, order.Errorf(order.ErrInvalidArgument, "activity_id must be a positive integer")
	}
	if err := refuseNull(field{"quantity", b.Quantity}, field{"item_id", b.ItemID}); err != nil {
		return 0, err
	}
	if b.ItemID.Set && b.ItemID.Value <= 0 {
		return 0, order.Errorf(order.ErrInvalidArgument, "item_id must be a positive integer")
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

// placeOrder reserves and publishes one order (placing.Service.Place) and
// answers 202 with its number; the order's fate is read with getOrder.
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
	placed, err := s.intake.Place(c.Request.Context(), placing.PlaceRequest{
		UserID: user, ActivityID: body.ActivityID, ItemID: body.ItemID.Value, Quantity: q,
		IdempotencyKey: key, RequestID: c.GetString(ctxRequestID), Admission: c.GetHeader("X-Admission"),
		AccessCode: body.AccessCode, ClientAddr: addrKey(c),
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
	ActivityID int64 `json:"activity_id,omitempty"`
	ItemID     int64 `json:"item_id"`
	// Label is the item's label in a sale of several items (its size).
	Label         string `json:"label,omitempty"`
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

// getOrder answers the buyer's order: MySQL's row, else its reservation in
// Redis (placing.Service.Status); another user's order is not found.
func (s *Server) getOrder(c *gin.Context) {
	no := c.Param("order_no")
	if !order.ValidOrderNo(no) {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	ctx := c.Request.Context()
	o, err := s.intake.Status(ctx, claimsOf(c).UserID, no)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := orderView(o)
	if o.ActivityID != 0 {
		// The label from this instance's copy of the sale (items never
		// change once it started); without it the answer still stands.
		if act, err := s.intake.Activity(ctx, o.ActivityID); err == nil {
			if it, ok := act.Item(o.ItemID); ok {
				v.Label = it.Label
			}
		}
	}
	c.JSON(http.StatusOK, v)
}
