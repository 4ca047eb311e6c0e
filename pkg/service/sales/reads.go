package sales

import (
	"context"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

// Items are the items MySQL keeps, as an operator adds one
// (*orderdb.Activities).
type Items interface {
	CreatePricedItem(ctx context.Context, name string, stock int64, price order.Money) (activity.Product, error)
}

// Tallies add up a sale's orders in MySQL (*orderdb.Activities).
type Tallies interface {
	ActivityTally(ctx context.Context, activityID int64) (map[int64]map[order.Status]order.StatusTally, error)
}

// CreateItem adds an item with its stock and price (the zero Money: none)
// to MySQL.
func (s *Service) CreateItem(ctx context.Context, name string, stock int64, price order.Money) (activity.Product, error) {
	return s.Items.CreatePricedItem(ctx, name, stock, price)
}

// Activity reads the sale from MySQL.
func (s *Service) Activity(ctx context.Context, id int64) (activity.Activity, error) {
	return s.Sales.Activity(ctx, id)
}

// ItemStock reads the item's stock in MySQL.
func (s *Service) ItemStock(ctx context.Context, item int64) (int64, error) {
	return s.Sales.ItemStock(ctx, item)
}

// ItemTag reads the hash tag the item's Redis keys are kept with (the
// first item of its latest sale).
func (s *Service) ItemTag(ctx context.Context, item int64) (int64, error) {
	return s.Sales.ItemTag(ctx, item)
}

// Tally adds up the sale's MySQL orders by item, then by status.
func (s *Service) Tally(ctx context.Context, id int64) (map[int64]map[order.Status]order.StatusTally, error) {
	return s.Tallies.ActivityTally(ctx, id)
}
