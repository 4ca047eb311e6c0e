package orderdb

import (
	"errors"

	"gorm.io/gorm"

	"github.com/seckill/seckill/pkg/domain/order"
)

// takeCodeSQL takes one use of a presale code for an order of user: the
// conditional update that makes MySQL the last word on a code as the
// stock's is on units (a code revoked, bound to another buyer or with
// every use held takes nothing).
const takeCodeSQL = `UPDATE sale_codes SET used = used + 1
	WHERE activity_id = ? AND digest = ? AND used < uses AND revoked_at IS NULL
	AND (subject IS NULL OR subject = ?)`

// takeCodes takes, in tx, a use of the code of every order of reqs that
// names one and is not refused; whole is false when a code had no use
// left for one of them (the caller rolls tx back and goes order by order,
// where takeCode says which order fails and why).
func takeCodes(tx *gorm.DB, reqs []order.FulfilRequest, refused map[string]string) (whole bool, err error) {
	for _, r := range reqs {
		e := r.Event
		if e.AccessCode == "" || refused[e.OrderNo] != "" {
			continue
		}
		res := tx.Exec(takeCodeSQL, e.ActivityID, e.AccessCode, e.UserID)
		if res.Error != nil {
			return false, res.Error
		}
		if res.RowsAffected == 0 {
			return false, nil
		}
	}
	return true, nil
}

// takeCode takes a use of e's code in tx ("" when it did, or e names no
// code), or says why the order fails: order.ReasonCodeUsed when the code
// is this buyer's to use and every use is held, order.ReasonCodeInvalid
// when it is revoked, bound to someone else or not the sale's at all.
func takeCode(tx *gorm.DB, e order.Event) (reason string, err error) {
	if e.AccessCode == "" {
		return "", nil
	}
	res := tx.Exec(takeCodeSQL, e.ActivityID, e.AccessCode, e.UserID)
	if res.Error != nil || res.RowsAffected == 1 {
		return "", res.Error
	}
	var c struct {
		Usable bool
	}
	err = tx.Raw(`SELECT revoked_at IS NULL AND (subject IS NULL OR subject = ?) AS usable
		FROM sale_codes WHERE activity_id = ? AND digest = ?`, e.UserID, e.ActivityID, e.AccessCode).Take(&c).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return order.ReasonCodeInvalid, nil
	case err != nil:
		return "", err
	case c.Usable:
		return order.ReasonCodeUsed, nil
	}
	return order.ReasonCodeInvalid, nil
}

// giveCode gives back, in tx, the use of code ("" for none) an order of
// activity took.
func giveCode(tx *gorm.DB, activity int64, code string) error {
	if code == "" {
		return nil
	}
	return tx.Exec(`UPDATE sale_codes SET used = used - 1 WHERE activity_id = ? AND digest = ? AND used > 0`,
		activity, code).Error
}

// giveCodeOf gives back, in tx, the use of its presale code the CREATED
// order orderNo held, as its close ends it unsold (closeCreated: the
// order's compare-and-set won in tx, so this runs once an order).
func giveCodeOf(tx *gorm.DB, orderNo string) error {
	return tx.Exec(`UPDATE sale_codes c JOIN orders o ON c.activity_id = o.activity_id AND c.digest = o.access_code
		SET c.used = c.used - 1 WHERE o.order_no = ? AND c.used > 0`, orderNo).Error
}
