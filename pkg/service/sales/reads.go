package sales

import (
	"context"
	"errors"

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

// Lists page through the sales MySQL keeps, newest first
// (*orderdb.Activities).
type Lists interface {
	ActivityIDs(ctx context.Context, before int64, limit int) ([]int64, error)
}

// MaxListPage is the most sales one read of the list returns: each costs
// its own reads of MySQL and Redis in the answer.
const MaxListPage = 100

// List reads up to limit sales below the id before (0: from the newest),
// newest first, each as Activity reads it, and the before of the next page
// (0 on the last). A sale the read no longer finds whole (its rows removed
// around the API, as a test's or the bench's clean-up does) is left out
// rather than failing the page.
func (s *Service) List(ctx context.Context, before int64, limit int) ([]activity.Activity, int64, error) {
	if limit < 1 || limit > MaxListPage {
		return nil, 0, order.Errorf(order.ErrInvalidArgument, "limit is a number between 1 and %d", MaxListPage)
	}
	ids, err := s.Lists.ActivityIDs(ctx, before, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]activity.Activity, 0, len(ids))
	for _, id := range ids {
		a, err := s.Sales.Activity(ctx, id)
		if errors.Is(err, order.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		out = append(out, a)
	}
	var next int64
	if len(ids) == limit {
		next = ids[len(ids)-1]
	}
	return out, next, nil
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
