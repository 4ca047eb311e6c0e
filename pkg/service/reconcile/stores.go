package reconcile

import (
	"context"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/drift"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

// Stock is Redis as the checks and repairs use it (*stockredis.Reconciler):
// atomic reads, and compare-and-set writes guarded by a fencing token.
type Stock interface {
	View(ctx context.Context, item reservation.Item, orderNos []string, restocks ...drift.PendingRestock) (drift.StockView, error)
	Layout(ctx context.Context, item reservation.Item) (activity.Layout, error)
	ScanQuota(ctx context.Context, item reservation.Item, activity int64, fn func(map[string]string) error) error
	QuotaHoldersOf(ctx context.Context, item reservation.Item, activity int64, users []string) (map[string]string, error)
	QuotaStates(ctx context.Context, item reservation.Item, activity int64, holders map[string]string) (map[string]drift.QuotaState, error)

	SetStock(ctx context.Context, item reservation.Item, seen drift.StockView, want int64, ttl time.Duration, g drift.Guard) (drift.CAS, error)
	MarkWarmed(ctx context.Context, item reservation.Item) error
	Restock(ctx context.Context, item reservation.Item, id, qty int64) (reservation.Restocked, error)
	RestoreQuota(ctx context.Context, item reservation.Item, activity int64, user, orderNo, was string, ttl time.Duration, g drift.Guard) (drift.CAS, error)
	RestoreQuotas(ctx context.Context, item reservation.Item, activity int64, recs []drift.QuotaRecord, g drift.Guard) ([]string, drift.CAS, error)
	RemoveQuota(ctx context.Context, item reservation.Item, activity int64, user, stale string, g drift.Guard) (drift.CAS, error)
	RestoreIdem(ctx context.Context, item reservation.Item, recs []drift.IdemRecord, g drift.Guard) (int, drift.CAS, error)
	RestoreReservations(ctx context.Context, item reservation.Item, buckets int, recs []drift.LostReservation, g drift.Guard) ([]string, drift.CAS, error)
	UnrestoreReservations(ctx context.Context, item reservation.Item, orderNos []string, g drift.Guard) (int, drift.CAS, error)
}

// DB is MySQL as the checks and repairs read it, a store each: the sales
// to check, an item's stock and its orders a page at a time, and what is in
// flight. It is also the stock reader a bucketed item's layout is restored
// from, and what the run pings when an item fails.
type DB struct {
	Reads       // *orderdb.Reconcile
	Restocks    // *orderdb.Restocks
	OrderLookup // *orderdb.Orders
	Items       // *orderdb.Activities
	Pinger      // *orderdb.DB
}

// Reads are the reconciler's reads of MySQL (*orderdb.Reconcile).
type Reads interface {
	Activities(ctx context.Context, f drift.ActivityFilter) ([]activity.Activity, error)
	ReadMark(ctx context.Context, itemID int64) (drift.ReadMark, error)
	StockSnapshot(ctx context.Context, itemID int64, orderNos []string, mark drift.ReadMark) (drift.StockSnapshot, error)
	ClosingOrders(ctx context.Context, itemID int64) (map[string]drift.OrderState, error)
	LiveOrderPage(ctx context.Context, activityID int64, after string, limit int) ([]drift.LiveOrder, error)
	LiveOrdersOf(ctx context.Context, activityID int64, users []string) (map[string]string, error)
	IdemOrderPage(ctx context.Context, activityID int64, after string, users int) (orders []drift.IdemOrder, last string, err error)
}

// Restocks are the restocks in flight and the stock a warm-up loads
// (*orderdb.Restocks).
type Restocks interface {
	reservation.StockReader
	PendingRestocks(ctx context.Context, itemID int64) ([]activity.Restock, error)
	MarkRestockApplied(ctx context.Context, id int64) error
}

// OrderLookup reads orders by number (*orderdb.Orders).
type OrderLookup interface {
	Orders(ctx context.Context, orderNos []string) (map[string]order.Order, error)
}

// Items reads an item (*orderdb.Activities).
type Items interface {
	Item(ctx context.Context, id int64) (activity.Product, error)
}
