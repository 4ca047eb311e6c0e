package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/redistest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
)

// dropStocks are twelve sizes with uneven stock: few of the smallest and
// largest, most in the middle (156 units).
var dropStocks = []int64{2, 4, 7, 11, 17, 24, 28, 23, 16, 11, 8, 5}

// buyers race a sized sale: each wants a size drawn with a skew toward a few
// (as real drops are), clicks again on another size at once one time in
// four (a double click on two sizes, two keys), and, hearing SOLD_OUT, tries
// the next size, until one is accepted or every size has answered. It
// returns the accepted orders (order number -> buyer) and every refusal by
// code.
func sizedCrowd(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, from, n int64, concurrency int) (map[string]int64, map[string]int) {
	t.Helper()
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
		byBuyer  = map[int64]int{}
		codes    = map[string]int{}
		wg       sync.WaitGroup
		sem      = make(chan struct{}, concurrency)
	)
	try := func(u int64, size int, key string) pipelinetest.Placed {
		p, err := api.PlaceOrderOf(strconv.FormatInt(u, 10), key, s.ActivityID, s.Items[size].ID, 1)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			t.Errorf("buyer %d: %v", u, err)
		case p.Code == 202:
			accepted[p.OrderNo] = u
			byBuyer[u]++
		default:
			codes[p.Error]++
		}
		return p
	}
	for u := from; u < from+n; u++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rnd := rand.New(rand.NewPCG(uint64(u), 30))
			// Zipf-like: half the buyers want one of the three middle sizes.
			order := rnd.Perm(len(s.Items))
			if rnd.IntN(2) == 0 {
				hot := 5 + rnd.IntN(3)
				for i, v := range order {
					if v == hot {
						order[0], order[i] = order[i], order[0]
					}
				}
			}
			if rnd.IntN(4) == 0 {
				var dc sync.WaitGroup
				dc.Add(2)
				var a, b pipelinetest.Placed
				go func() { defer dc.Done(); a = try(u, order[0], fmt.Sprintf("dc-a-%d", u)) }()
				go func() { defer dc.Done(); b = try(u, order[1], fmt.Sprintf("dc-b-%d", u)) }()
				dc.Wait()
				if a.Code == 202 || b.Code == 202 || a.Error == "ALREADY_PURCHASED" || b.Error == "ALREADY_PURCHASED" {
					return
				}
			}
			for _, size := range order {
				p := try(u, size, fmt.Sprintf("k-%d-%d", u, size))
				if p.Code == 202 || p.Error == "ALREADY_PURCHASED" {
					return
				}
			}
		}()
	}
	wg.Wait()
	for u, n := range byBuyer {
		if n > 1 {
			t.Errorf("buyer %d has %d accepted orders in the sale", u, n)
		}
	}
	return accepted, codes
}

func TestSizedDropTwoThousandBuyersTwelveSizes(t *testing.T) {
	t.Parallel()
	sizedDrop(t, false, 1)
}

func TestSizedDropTwoThousandBuyersTwelveSizesOnRedisCluster(t *testing.T) {
	t.Parallel()
	sizedDrop(t, true, 1)
}

// Hot sizes still spread over stock buckets: each size's stock in 3
// buckets on their own slots, the sale's quota on its first item's.
func TestSizedDropWithStockBucketsOnRedisCluster(t *testing.T) {
	t.Parallel()
	sizedDrop(t, true, 3)
}

// 2,000 buyers race a drop of twelve sizes with uneven stock through two
// API processes, one size restocked by 5 units mid-sale (the same restock
// request sent twice): every size sells exactly its stock (the restocked
// one its stock plus 5), no size is oversold, no buyer holds two live
// orders across sizes, Redis and MySQL agree per size, and the reconciler
// finds nothing to repair.
func sizedDrop(t *testing.T, cluster bool, buckets int) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3, RedisCluster: cluster})
	api1, api2 := p.StartAPI(), p.StartAPI()
	p.StartConsumer()
	sale := api1.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: dropStocks, Buckets: buckets})

	restocked := sale.Items[3]
	var crowds sync.WaitGroup
	results := make([]map[string]int64, 2)
	codes := make([]map[string]int, 2)
	for i, api := range []*pipelinetest.API{api1, api2} {
		crowds.Add(1)
		go func() {
			defer crowds.Done()
			results[i], codes[i] = sizedCrowd(t, api, sale, int64(1+i*1000), 1000, 30)
		}()
	}
	// Mid-sale: the restock lands once, whichever times it is sent.
	waitUnitsLeftBelow(t, api1, sale.ActivityID, 120)
	for range 2 {
		code, err := api1.Do("POST", fmt.Sprintf("/admin/v1/items/%d/restock", restocked.ID), 1, auth.RoleAdmin,
			map[string]string{"Idempotency-Key": "mid-sale"}, map[string]any{"quantity": 5}, nil)
		if err != nil || code != 200 {
			t.Fatalf("restock: %d %v", code, err)
		}
	}
	crowds.Wait()
	accepted := map[string]int64{}
	for _, r := range results {
		for no, u := range r {
			accepted[no] = u
		}
	}
	var total int64
	for _, it := range sale.Items {
		total += it.Stock
	}
	total += 5
	if int64(len(accepted)) != total {
		t.Fatalf("accepted %d orders, want every unit sold: %d (refusals %v %v)", len(accepted), total, codes[0], codes[1])
	}
	final := p.WaitFinal(accepted, 120*time.Second)
	perItem := map[int64]int64{}
	for _, o := range final {
		if o.Status != order.Created {
			t.Fatalf("order %s is %s (%s), want CREATED", o.OrderNo, o.Status, o.FailureReason)
		}
		perItem[o.ItemID]++
	}
	p.WaitSaleDrained(sale, 30*time.Second)
	restocked.Stock += 5
	sale.Items[3] = restocked
	for _, it := range sale.Items {
		if perItem[it.ID] != it.Stock {
			t.Errorf("size %s sold %d, want its exact stock %d", it.Label, perItem[it.ID], it.Stock)
		}
	}
	p.CheckItems(sale)
	res := p.Reconcile("--json", "--recheck", "100ms", "--activity", strconv.FormatInt(sale.ActivityID, 10))
	if res.Code != 0 {
		t.Fatalf("reconciler after the drop: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}

// waitUnitsLeftBelow polls the sale page until fewer than n units are left.
func waitUnitsLeftBelow(t *testing.T, api *pipelinetest.API, activity int64, n int64) {
	t.Helper()
	waittest.UntilEvery(t, 60*time.Second, 10*time.Millisecond, fmt.Sprintf("the sale page shows fewer than %d units left", n), func() bool {
		var page struct {
			UnitsLeft int64 `json:"units_left"`
		}
		code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", activity), 0, "", nil, nil, &page)
		return err == nil && code == 200 && page.UnitsLeft < n
	})
}

// The rules of a sale of several items, through the API: item_id is
// required and must be one of the sale's; one live order per buyer across
// sizes; a sold-out size refuses while the others sell; a replayed key
// returns its order only for the same request (422 otherwise, on a sale of
// one item too); the status names the size; the sale page and the summary
// show each size; a buyer's cancel gives the unit back to its size.
func TestSizedSaleRules(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	sale := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{1, 2, 3}, PerUserLimit: 3, Price: 1000, Currency: "EUR"})
	s1, s2, s3 := sale.Items[0], sale.Items[1], sale.Items[2]
	other := api.CreateSale(5, 3)
	act := sale.ActivityID

	place := func(user int64, key string, item int64, qty int) pipelinetest.Placed {
		t.Helper()
		pl, err := api.PlaceOrderOf(strconv.FormatInt(user, 10), key, act, item, qty)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	var noItem struct {
		Error struct{ Code string } `json:"error"`
	}
	if code, err := api.Do("POST", "/api/v1/orders", 1, "", map[string]string{"Idempotency-Key": "x"},
		map[string]any{"activity_id": act}, &noItem); err != nil || code != 400 || noItem.Error.Code != "INVALID_ARGUMENT" {
		t.Fatalf("an order without item_id: %d %+v %v, want 400 INVALID_ARGUMENT", code, noItem, err)
	}
	if pl := place(1, "x", other.ItemID, 1); pl.Code != 400 {
		t.Fatalf("an item the sale does not sell: %+v, want 400", pl)
	}

	first := place(1, "a", s2.ID, 1)
	if first.Code != 202 {
		t.Fatalf("buyer 1, size 2: %+v", first)
	}
	if pl := place(1, "b", s3.ID, 1); pl.Code != 409 || pl.Error != "ALREADY_PURCHASED" {
		t.Fatalf("buyer 1, a second size: %+v, want 409 ALREADY_PURCHASED", pl)
	}
	for _, c := range []struct {
		name string
		item int64
		qty  int
	}{{"another size", s3.ID, 1}, {"another quantity", s2.ID, 2}} {
		if pl := place(1, "a", c.item, c.qty); pl.Code != 422 || pl.Error != "IDEMPOTENCY_KEY_REUSED" {
			t.Fatalf("the key replayed with %s: %+v, want 422 IDEMPOTENCY_KEY_REUSED", c.name, pl)
		}
	}
	if pl := place(1, "a", s2.ID, 1); pl.Code != 202 || pl.OrderNo != first.OrderNo {
		t.Fatalf("the key replayed with the same request: %+v, want 202 with %s", pl, first.OrderNo)
	}
	taken := place(2, "a", s1.ID, 1)
	if taken.Code != 202 {
		t.Fatalf("buyer 2, size S1: %+v", taken)
	}
	if pl := place(3, "a", s1.ID, 1); pl.Code != 409 || pl.Error != "SOLD_OUT" {
		t.Fatalf("buyer 3, sold-out S1: %+v, want 409 SOLD_OUT", pl)
	}
	third := place(3, "b", s3.ID, 2)
	if third.Code != 202 {
		t.Fatalf("buyer 3, size S3 after S1 sold out: %+v", third)
	}
	accepted := map[string]int64{first.OrderNo: 1, taken.OrderNo: 2, third.OrderNo: 3}
	p.WaitFinal(accepted, 60*time.Second)

	var view struct {
		Status, Label string
		ItemID        int64 `json:"item_id"`
		Amount        int64
	}
	if code, err := api.Do("GET", "/api/v1/orders/"+third.OrderNo, 3, "", nil, nil, &view); err != nil || code != 200 ||
		view.Status != "CREATED" || view.ItemID != s3.ID || view.Label != "size 3" || view.Amount != 2000 {
		t.Fatalf("buyer 3's order: %d %+v %v, want CREATED, item %d labelled size 3, amount 2000", code, view, err, s3.ID)
	}

	type pageItem struct {
		ItemID    int64 `json:"item_id"`
		Label     string
		UnitsLeft int64 `json:"units_left"`
		State     string
		SalePrice int64 `json:"sale_price"`
	}
	var page struct {
		State     string
		UnitsLeft int64 `json:"units_left"`
		Items     []pageItem
	}
	readPage := func(want string) {
		t.Helper()
		waittest.Until(t, 10*time.Second, "the sale page shows "+want, func() bool {
			code, err := api.Do("GET", fmt.Sprintf("/api/v1/activities/%d", act), 0, "", nil, nil, &page)
			return err == nil && code == 200 && fmt.Sprint(page.Items) == want
		})
	}
	want := fmt.Sprint([]pageItem{{s1.ID, "size 1", 0, "SOLD_OUT", 1000}, {s2.ID, "size 2", 1, "LIVE", 1000}, {s3.ID, "size 3", 1, "LIVE", 1000}})
	readPage(want)
	if page.State != "LIVE" || page.UnitsLeft != 2 {
		t.Fatalf("sale page %+v, want LIVE with 2 units left", page)
	}

	// Buyer 2 cancels: the unit goes back to S1, and S1 sells again.
	if code, err := api.Do("POST", "/api/v1/orders/"+taken.OrderNo+"/cancel", 2, "", nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel: %d %v", code, err)
	}
	readPage(fmt.Sprint([]pageItem{{s1.ID, "size 1", 1, "LIVE", 1000}, {s2.ID, "size 2", 1, "LIVE", 1000}, {s3.ID, "size 3", 1, "LIVE", 1000}}))

	var summary struct {
		UnitsSold int64 `json:"units_sold"`
		Items     []struct {
			ItemID    int64 `json:"item_id"`
			UnitsSold int64 `json:"units_sold"`
			DBStock   int64 `json:"db_stock"`
		}
	}
	if code, err := api.Do("GET", fmt.Sprintf("/admin/v1/activities/%d/summary", act), 1, auth.RoleAdmin, nil, nil, &summary); err != nil || code != 200 ||
		summary.UnitsSold != 3 || len(summary.Items) != 3 || summary.Items[0].UnitsSold != 0 || summary.Items[0].DBStock != 1 ||
		summary.Items[1].UnitsSold != 1 || summary.Items[2].UnitsSold != 2 {
		t.Fatalf("summary: %d %+v %v", code, summary, err)
	}
	p.WaitSaleDrained(sale, 30*time.Second)
	sale.Items[0].Stock, sale.Items[1].Stock, sale.Items[2].Stock = 1, 2, 3
	p.CheckItems(sale)

	// On a sale of one item too, the same key with another quantity is 422.
	if pl, err := api.PlaceOrder(9, "q", other.ActivityID, 1); err != nil || pl.Code != 202 {
		t.Fatalf("plain sale: %+v %v", pl, err)
	}
	if pl, err := api.PlaceOrder(9, "q", other.ActivityID, 3); err != nil || pl.Code != 422 || pl.Error != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("plain sale, the key replayed for 3 units: %+v %v, want 422 IDEMPOTENCY_KEY_REUSED", pl, err)
	}
}

func TestReconcilerRestoresASizedSaleAfterRedisLostItsKeys(t *testing.T) {
	t.Parallel()
	restoresSizedSale(t, false, false)
}

func TestReconcilerRestoresASizedSaleAfterRedisLostItsKeysOnRedisCluster(t *testing.T) {
	t.Parallel()
	restoresSizedSale(t, true, false)
}

// The consumer's data-loss watch does the same on its own.
func TestConsumerHealsASizedSaleAfterRedisLostItsKeys(t *testing.T) {
	t.Parallel()
	restoresSizedSale(t, false, true)
}

// Redis loses every key of a sized sale mid-sale: the reconciler reports
// each size unwarmed with its drift, its repair (or, with heal, the
// consumer's watch) restores each size's stock and the sale's quota and
// idempotency records, and after it the buyers who bought cannot buy
// another size, their keys give their orders back, and new buyers take
// exactly what each size has left.
func restoresSizedSale(t *testing.T, cluster, heal bool) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, RedisCluster: cluster})
	api := p.StartAPI()
	if heal {
		p.StartConsumer("SECKILL_HEAL_EVERY=100ms")
		waittest.Until(t, 10*time.Second, "the watch's generation marker", func() bool {
			return p.Redis.Exists(context.Background(), p.Prefix+":heal:generation").Val() == 1
		})
	} else {
		p.StartConsumer("SECKILL_HEAL_EVERY=off") // this is the reconciler's
	}
	sale := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{3, 5, 8}})
	bought := map[int64]string{}
	accepted := map[string]int64{}
	for u := int64(1); u <= 6; u++ {
		size := sale.Items[int(u)%3]
		pl, err := api.PlaceOrderOf(strconv.FormatInt(u, 10), fmt.Sprintf("k-%d", u), sale.ActivityID, size.ID, 1)
		if err != nil || pl.Code != 202 {
			t.Fatalf("buyer %d: %+v %v", u, pl, err)
		}
		bought[u], accepted[pl.OrderNo] = pl.OrderNo, u
	}
	p.WaitFinal(accepted, 60*time.Second)
	p.WaitSaleDrained(sale, 10*time.Second)
	deletePrefix(t, p)

	activity := strconv.FormatInt(sale.ActivityID, 10)
	if heal {
		waittest.Until(t, 30*time.Second, "the watch to restore every size", func() bool {
			for _, it := range sale.Items {
				snap, err := p.Store.Stock.Stock(context.Background(), sale.Item(it.ID))
				if err != nil || !snap.Warmed {
					return false
				}
			}
			return true
		})
	} else {
		if res := p.Reconcile("--json", "--activity", activity); res.Code != 1 {
			t.Fatalf("check after Redis lost the sale: exit %d, want 1 (drift)\n%s", res.Code, res.Stdout)
		}
		if res := p.Reconcile("--json", "--repair", "--activity", activity); res.Code != 0 {
			t.Fatalf("repair: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
	}
	waittest.Until(t, 30*time.Second, "the reconciler to find the sale agreeing", func() bool {
		return p.Reconcile("--json", "--activity", activity).Code == 0
	})
	for u, no := range bought {
		sub := strconv.FormatInt(u, 10)
		other := sale.Items[(int(u)+1)%3]
		if pl, err := api.PlaceOrderOf(sub, "new", sale.ActivityID, other.ID, 1); err != nil || pl.Error != "ALREADY_PURCHASED" {
			t.Fatalf("buyer %d, another size after the repair: %+v %v, want ALREADY_PURCHASED", u, pl, err)
		}
		mine := sale.Items[int(u)%3]
		if pl, err := api.PlaceOrderOf(sub, fmt.Sprintf("k-%d", u), sale.ActivityID, mine.ID, 1); err != nil || pl.Code != 202 || pl.OrderNo != no {
			t.Fatalf("buyer %d, the same key after the repair: %+v %v, want 202 with %s", u, pl, err, no)
		}
	}
	more, _ := sizedCrowd(t, api, sale, 100, 40, 10)
	if len(more) != 16-6 {
		t.Fatalf("new buyers took %d units, want the 10 left", len(more))
	}
	p.WaitFinal(more, 60*time.Second)
	p.WaitSaleDrained(sale, 10*time.Second)
	for i, inv := range p.CheckItems(sale) {
		if inv.DBStock != 0 {
			t.Fatalf("item %d: %+v, want sold out", i, inv)
		}
	}
}

// deletePrefix deletes every key of the pipeline's prefix, on every node.
func deletePrefix(t *testing.T, p *pipelinetest.Pipeline) {
	t.Helper()
	ctx := context.Background()
	var deleted atomic.Int64
	err := redistest.ForEachNode(ctx, p.Redis, func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, p.Prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := node.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
			deleted.Add(1)
		}
		return iter.Err()
	})
	if err != nil || deleted.Load() == 0 {
		t.Fatalf("deleting the prefix's keys: %d deleted, %v", deleted.Load(), err)
	}
}

// Before the start, PATCH replaces a sale's items (a plain sale becomes a
// sale in sizes, a size is added, a label changes): the answer and the
// sale page carry the new items, a warm-up loads each, and buyers buy them.
// Once warmed, the items are locked (409 SETTING_LOCKED), as its bucket
// count is.
func TestPatchItemsBeforeTheStart(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	var ids []int64
	for i, stock := range []int64{2, 3, 4} {
		var item struct {
			ItemID int64 `json:"item_id"`
		}
		if code, err := api.Do("POST", "/admin/v1/items", 1, auth.RoleAdmin, nil,
			map[string]any{"name": fmt.Sprintf("size %d", i), "stock": stock}, &item); err != nil || code != 201 {
			t.Fatalf("create item: %d %v", code, err)
		}
		ids = append(ids, item.ItemID)
	}
	starts := time.Now().UTC().Add(5 * time.Second)
	var created struct {
		ActivityID int64 `json:"activity_id"`
	}
	if code, err := api.Do("POST", "/admin/v1/activities", 1, auth.RoleAdmin, nil,
		map[string]any{"item_id": ids[0], "starts_at": starts, "ends_at": starts.Add(time.Hour)}, &created); err != nil || code != 201 {
		t.Fatalf("create sale: %d %v", code, err)
	}
	act := created.ActivityID
	type itemView struct {
		ItemID int64 `json:"item_id"`
		Label  string
	}
	var changed struct {
		ItemID int64 `json:"item_id"`
		Items  []itemView
	}
	body := map[string]any{"items": []map[string]any{{"item_id": ids[1], "label": "M"}, {"item_id": ids[0], "label": "S"}, {"item_id": ids[2], "label": "L"}}}
	if code, err := api.Do("PATCH", fmt.Sprintf("/admin/v1/activities/%d", act), 1, auth.RoleAdmin, nil, body, &changed); err != nil || code != 200 ||
		changed.ItemID != ids[1] || fmt.Sprint(changed.Items) != fmt.Sprint([]itemView{{ids[1], "M"}, {ids[0], "S"}, {ids[2], "L"}}) {
		t.Fatalf("PATCH items: %d %+v %v", code, changed, err)
	}
	// The warm-up waits until every instance has seen the change.
	waittest.Until(t, 10*time.Second, "the warm-up after the change", func() bool {
		code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/warmup", act), 1, auth.RoleAdmin, nil, nil, nil)
		return err == nil && code == 200
	})
	var refused struct {
		Error struct{ Code string } `json:"error"`
	}
	if code, err := api.Do("PATCH", fmt.Sprintf("/admin/v1/activities/%d", act), 1, auth.RoleAdmin, nil,
		map[string]any{"items": []map[string]any{{"item_id": ids[1], "label": "M"}}}, &refused); err != nil || code != 409 || refused.Error.Code != "SETTING_LOCKED" {
		t.Fatalf("PATCH items after the warm-up: %d %+v %v, want 409 SETTING_LOCKED", code, refused, err)
	}
	sale := pipelinetest.Sale{ItemID: ids[1], ActivityID: act, Stock: 9, Items: []pipelinetest.SaleItem{{ID: ids[1], Label: "M", Stock: 3}, {ID: ids[0], Label: "S", Stock: 2}, {ID: ids[2], Label: "L", Stock: 4}}}
	waittest.Until(t, 20*time.Second, "the sale to open", func() bool { return !time.Now().Before(starts.Add(100 * time.Millisecond)) })
	accepted, _ := sizedCrowd(t, api, sale, 1, 30, 10)
	if len(accepted) != 9 {
		t.Fatalf("accepted %d orders, want all 9 units of the three sizes", len(accepted))
	}
	p.WaitFinal(accepted, 60*time.Second)
	p.WaitSaleDrained(sale, 20*time.Second)
	p.CheckItems(sale)
}

// Units of a sized sale come back to their own size: from orders left
// unpaid past the payment window (the closer), and from every CREATED order
// when the operator cancels the sale; the buyers of closed orders may buy
// again, a payer may not.
func TestSizedOrdersGiveTheirUnitsBackToTheirSize(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer("SECKILL_PAYMENT_WINDOW=2s", "SECKILL_CLOSER_EVERY=200ms")
	sale := api.CreateSaleWith(0, pipelinetest.SaleOptions{Sizes: []int64{2, 3, 4}})
	buy := func(s pipelinetest.Sale, u int64, size int) string {
		t.Helper()
		pl, err := api.PlaceOrderOf(strconv.FormatInt(u, 10), fmt.Sprintf("k-%d", size), s.ActivityID, s.Items[size].ID, 1)
		if err != nil || pl.Code != 202 {
			t.Fatalf("buyer %d, size %d: %+v %v", u, size, pl, err)
		}
		return pl.OrderNo
	}
	orders := map[string]int64{buy(sale, 1, 0): 1, buy(sale, 2, 1): 2, buy(sale, 3, 2): 3, buy(sale, 4, 2): 4}
	final := p.WaitFinal(orders, 30*time.Second)
	for no, o := range final {
		if o.UserID == "4" {
			if code, _ := act(t, api, o.UserID, no, "pay"); code != 200 {
				t.Fatalf("pay: %d", code)
			}
		}
	}
	waittest.Until(t, 30*time.Second, "three orders closed unpaid", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'CLOSED' AND released_at IS NOT NULL", sale.ActivityID) == 3
	})
	p.WaitSaleDrained(sale, 10*time.Second)
	// Only the paid unit of size 3 is gone.
	sale.Items[2].Stock = 4
	inv := p.CheckItems(sale)
	if inv[0].DBStock != 2 || inv[1].DBStock != 3 || inv[2].DBStock != 3 {
		t.Fatalf("after the closes: %+v, want 2, 3 and 3 units left", inv)
	}
	if pl, _ := api.PlaceOrderOf("4", "again", sale.ActivityID, sale.Items[0].ID, 1); pl.Error != "ALREADY_PURCHASED" {
		t.Fatalf("the payer bought another size: %+v", pl)
	}
	again := buy(sale, 1, 1) // a closed order's buyer buys again, another size

	// Cancel the sale: the CREATED order closes and its unit goes back.
	p.WaitFinal(map[string]int64{again: 1}, 30*time.Second)
	if code, err := api.Do("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", sale.ActivityID), 1, auth.RoleAdmin, nil, nil, nil); err != nil || code != 200 {
		t.Fatalf("cancel the sale: %d %v", code, err)
	}
	waittest.Until(t, 30*time.Second, "the cancelled sale's order closed and released", func() bool {
		return p.Count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'CLOSED' AND released_at IS NOT NULL", again) == 1
	})
	p.WaitSaleDrained(sale, 10*time.Second)
	inv = p.CheckItems(sale)
	if inv[1].DBStock != 3 {
		t.Fatalf("after the cancel: %+v, want size 2 back at 3", inv)
	}
}
