package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/payment"
)

const specFile = "../docs/openapi.yaml"

// specCheck sends requests to the real api and validates every answer
// against docs/openapi.yaml: the status must be declared for the
// operation, the headers and the body must match it.
type specCheck struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	client *http.Client
	seen   map[string]map[int]bool // "METHOD /path/{template}" -> statuses
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s: %v", specFile, err)
	}
	return doc
}

// newSpecCheck validates answers of the apis at bases.
// The waiting page's types are text, checked against a string schema.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
}

func newSpecCheck(t *testing.T, bases ...string) *specCheck {
	t.Helper()
	doc := loadSpec(t)
	doc.Servers = nil
	for _, b := range bases {
		doc.Servers = append(doc.Servers, &openapi3.Server{URL: b})
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &specCheck{t: t, doc: doc, router: router, client: &http.Client{Timeout: 15 * time.Second},
		seen: map[string]map[int]bool{}}
}

// specCall is one request; token "" sends no Authorization header.
type specCall struct {
	method, path string
	token        string
	header       map[string]string
	body         string
}

// do sends c to base, checks the status is want and the answer matches the
// spec, and returns the body.
func (sc *specCheck) do(base string, c specCall, want int) []byte {
	sc.t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, base+c.path, body)
	if err != nil {
		sc.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := sc.client.Do(req)
	if err != nil {
		sc.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		sc.t.Fatal(err)
	}
	if resp.StatusCode != want {
		sc.t.Fatalf("%s %s: status %d, want %d; body %s", c.method, c.path, resp.StatusCode, want, b)
	}

	route, params, err := sc.router.FindRoute(req)
	if err != nil {
		sc.t.Fatalf("%s %s: not in the spec: %v", c.method, c.path, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(b)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		sc.t.Errorf("%s %s -> %d %s\ndoes not match the spec: %v", c.method, c.path, resp.StatusCode, b, err)
	}
	op := route.Method + " " + route.Path
	if sc.seen[op] == nil {
		sc.seen[op] = map[int]bool{}
	}
	sc.seen[op][resp.StatusCode] = true
	return b
}

// errorShape checks a body of an answer no operation declares (no route,
// wrong method) against the spec's Error schema.
func (sc *specCheck) errorShape(base string, c specCall, want int, code string) {
	sc.t.Helper()
	req, _ := http.NewRequest(c.method, base+c.path, nil)
	resp, err := sc.client.Do(req)
	if err != nil {
		sc.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		sc.t.Fatal(err)
	}
	if resp.StatusCode != want || resp.Header.Get("X-Request-ID") == "" {
		sc.t.Fatalf("%s %s: %d (X-Request-ID %q), want %d", c.method, c.path, resp.StatusCode, resp.Header.Get("X-Request-ID"), want)
	}
	if err := sc.doc.Components.Schemas["Error"].Value.VisitJSON(v); err != nil {
		sc.t.Errorf("%s %s: %v", c.method, c.path, err)
	}
	if got := v.(map[string]any)["error"].(map[string]any)["code"]; got != code {
		sc.t.Errorf("%s %s: code %v, want %s", c.method, c.path, got, code)
	}
}

// Every route's success and main error answers from the real api (and
// consumer), validated against docs/openapi.yaml, so the spec cannot drift
// from what the programs do.
func TestOpenAPISpecMatchesTheAPI(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI("SECKILL_RATE_LIMIT_USER=0", "SECKILL_WEBHOOK_ALLOW_PRIVATE=true")
	// No scheduled warm-up: the "cold" sale below must stay unwarmed.
	p.StartConsumer("SECKILL_WARMUP_LEAD=off")
	limited := p.StartAPI("SECKILL_RATE_LIMIT_USER=1")
	// An api whose Redis is gone: it starts (Redis is not needed to start)
	// but is not ready and cannot take orders.
	brokenAddr := pipelinetest.FreeAddr(t)
	p.Start("api", "SECKILL_HTTP_ADDR="+brokenAddr, "SECKILL_REDIS_ADDR=127.0.0.1:1")
	broken := "http://" + brokenAddr
	waitHealthy(t, broken)

	sc := newSpecCheck(t, api.URL, limited.URL, broken)
	admin, buyer := pipelinetest.Token(1, auth.RoleAdmin), pipelinetest.Token(10, "")
	buyerB := pipelinetest.Token(11, "")
	base := api.URL
	big := `{"name":"x","stock":1` + strings.Repeat(" ", 5000) + `}`
	const unknownOrder = "01ARZ3NDEKTSV4RRFFQ69G5FAV-1"
	id := func(b []byte, field string) int64 {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return int64(m[field].(float64))
	}

	// Probes and metrics.
	sc.do(base, specCall{method: "GET", path: "/healthz"}, 200)
	sc.do(base, specCall{method: "GET", path: "/readyz"}, 200)
	sc.do(base, specCall{method: "GET", path: "/metrics"}, 200)
	sc.do(broken, specCall{method: "GET", path: "/readyz"}, 503)

	// Items.
	item := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"sneaker","stock":3,"price":1999,"currency":"EUR"}`}, 201), "item_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"","stock":3}`}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"a","stock":3,"price":1999}`}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items", body: `{"name":"a","stock":3}`}, 401)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: buyer, body: `{"name":"a","stock":3}`}, 403)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: big}, 413)
	stockPath := fmt.Sprintf("/admin/v1/items/%d/stock", item)
	sc.do(base, specCall{method: "GET", path: stockPath, token: admin}, 200) // redis_stock null before warm-up
	sc.do(base, specCall{method: "GET", path: "/admin/v1/items/999999999/stock", token: admin}, 404)
	sc.do(base, specCall{method: "GET", path: stockPath, token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: stockPath}, 401)
	sc.do(broken, specCall{method: "GET", path: stockPath, token: admin}, 503)

	// Activities.
	now := time.Now().UTC()
	activity := func(item int64, from, to time.Time) string {
		return fmt.Sprintf(`{"item_id":%d,"starts_at":%q,"ends_at":%q,"per_user_limit":1}`, item, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	open := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(item, now.Add(-time.Minute), now.Add(time.Hour))}, 201), "activity_id")
	future := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(item, now.Add(time.Hour), now.Add(2*time.Hour))}, 201), "activity_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(item, now, now.Add(-time.Hour))}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(999999999, now, now.Add(time.Hour))}, 404)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: buyer, body: activity(item, now, now.Add(time.Hour))}, 403)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", body: activity(item, now, now.Add(time.Hour))}, 401)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: big}, 413)
	// One sale owns an item at a time: another of item while open runs is a
	// 409; a sale of an item of its own is made.
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(item, now, now.Add(time.Hour))}, 409)
	priced := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"priced","stock":1,"price":2000,"currency":"EUR"}`}, 201), "item_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: strings.TrimSuffix(activity(priced, now, now.Add(time.Hour)), "}") + `,"sale_price":1500}`}, 201)
	restocked := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"restocked","stock":1}`}, 201), "item_id")
	restockPath := fmt.Sprintf("/admin/v1/items/%d/restock", restocked)
	rk := map[string]string{"Idempotency-Key": "spec-restock"}
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, header: rk, body: `{"quantity":2}`}, 200) // redis_stock null
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, header: rk, body: `{"quantity":2}`}, 200) // replayed
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, header: rk, body: `{"quantity":3}`}, 422)
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, header: rk, body: `{"quantity":0}`}, 400)
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, body: `{"quantity":2}`}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/items/999999999/restock", token: admin, header: rk, body: `{"quantity":2}`}, 404)
	sc.do(base, specCall{method: "POST", path: restockPath, token: buyer, header: rk, body: `{"quantity":2}`}, 403)
	sc.do(base, specCall{method: "POST", path: restockPath, header: rk, body: `{"quantity":2}`}, 401)
	sc.do(base, specCall{method: "POST", path: restockPath, token: admin, header: rk, body: big}, 413)
	warm := func(a int64) string { return fmt.Sprintf("/admin/v1/activities/%d/warmup", a) }
	sc.do(base, specCall{method: "POST", path: warm(open), token: admin}, 200)
	sc.do(base, specCall{method: "POST", path: warm(999999999), token: admin}, 404)
	sc.do(base, specCall{method: "POST", path: warm(open), token: buyer}, 403)
	sc.do(base, specCall{method: "POST", path: warm(open)}, 401)
	sc.do(base, specCall{method: "GET", path: stockPath, token: admin}, 200)
	coldItem := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"cold","stock":1}`}, 201), "item_id")
	cold := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(coldItem, now.Add(-time.Minute), now.Add(time.Hour))}, 201), "activity_id")
	goneItem := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"gone","stock":0}`}, 201), "item_id")
	gone := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: activity(goneItem, now.Add(-time.Minute), now.Add(time.Hour))}, 201), "activity_id")
	sc.do(base, specCall{method: "POST", path: warm(gone), token: admin}, 200)

	// The sale page: no token, an ETag, 304 for it.
	salePage := func(a int64) string { return fmt.Sprintf("/api/v1/activities/%d", a) }
	sc.do(base, specCall{method: "GET", path: salePage(future)}, 200)
	pageReq, _ := http.NewRequest("GET", base+salePage(future), nil)
	pageResp, err := http.DefaultClient.Do(pageReq)
	if err != nil {
		t.Fatal(err)
	}
	pageResp.Body.Close()
	sc.do(base, specCall{method: "GET", path: salePage(future), header: map[string]string{"If-None-Match": pageResp.Header.Get("ETag")}}, 304)
	sc.do(base, specCall{method: "GET", path: salePage(999999999)}, 404)
	sc.do(broken, specCall{method: "GET", path: salePage(open)}, 503)

	// Orders.
	place := func(token, key string, activity int64) specCall {
		return specCall{method: "POST", path: "/api/v1/orders", token: token, header: map[string]string{"Idempotency-Key": key},
			body: fmt.Sprintf(`{"activity_id":%d,"quantity":1}`, activity)}
	}
	no := func(b []byte) string {
		var v struct {
			OrderNo string `json:"order_no"`
		}
		_ = json.Unmarshal(b, &v)
		return v.OrderNo
	}
	first := no(sc.do(base, place(buyer, "a", open), 202))
	second := no(sc.do(base, place(buyerB, "b", open), 202))
	if replay := no(sc.do(base, place(buyer, "a", open), 202)); replay != first {
		t.Fatalf("replay gave %s, want %s", replay, first)
	}
	sc.do(base, place(buyer, "c", open), 409)   // ALREADY_PURCHASED
	sc.do(base, place(buyer, "d", future), 409) // ACTIVITY_NOT_ACTIVE
	sc.do(base, place(buyer, "e", cold), 409)   // NOT_WARMED
	sc.do(base, place(buyer, "f", gone), 409)   // SOLD_OUT
	sc.do(base, place(buyer, "g", 999999999), 404)
	sc.do(base, place("", "h", open), 401)
	noKey := place(buyer, "", open)
	noKey.header = nil
	sc.do(base, noKey, 400)
	sc.do(base, specCall{method: "POST", path: "/api/v1/orders", token: buyer, header: map[string]string{"Idempotency-Key": "i"},
		body: `{"activity_id":1` + strings.Repeat(" ", 5000) + `}`}, 413)
	sc.do(broken, place(pipelinetest.Token(12, ""), "j", open), 503)

	orderPath := func(no string) string { return "/api/v1/orders/" + no }
	sc.do(base, specCall{method: "GET", path: orderPath(first), token: buyer}, 200)
	sc.do(base, specCall{method: "GET", path: orderPath(first), token: buyerB}, 404) // another user's
	sc.do(base, specCall{method: "GET", path: orderPath(unknownOrder), token: buyer}, 404)
	sc.do(base, specCall{method: "GET", path: orderPath(first)}, 401)
	sc.do(broken, specCall{method: "GET", path: orderPath(unknownOrder), token: buyer}, 503)

	p.WaitFinal(map[string]int64{first: 10, second: 11}, 30*time.Second)
	sc.do(base, specCall{method: "POST", path: orderPath(first) + "/pay", token: buyer}, 200)
	sc.do(base, specCall{method: "POST", path: orderPath(first) + "/cancel", token: buyer}, 409) // PAID
	sc.do(base, specCall{method: "POST", path: orderPath(second) + "/cancel", token: buyerB}, 200)
	sc.do(base, specCall{method: "POST", path: orderPath(second) + "/pay", token: buyerB}, 409) // CLOSED
	sc.do(base, specCall{method: "GET", path: orderPath(second), token: buyerB}, 200)           // with failure_reason
	var paid struct {
		Status    string `json:"status"`
		UnitPrice int64  `json:"unit_price"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: orderPath(first), token: buyer}, 200), &paid); err != nil {
		t.Fatal(err)
	}
	if paid.Status != "PAID" || paid.UnitPrice != 1999 || paid.Amount != 1999 || paid.Currency != "EUR" {
		t.Errorf("the consumer wrote the order at %+v, want 1999 EUR", paid)
	}
	sc.do(base, specCall{method: "GET", path: "/api/v1/orders?limit=1", token: buyer}, 200)
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/api/v1/orders?activity_id=%d&status=PAID", open), token: buyer}, 200)
	sc.do(base, specCall{method: "GET", path: "/api/v1/orders?cursor=not-one", token: buyer}, 400)
	sc.do(base, specCall{method: "GET", path: "/api/v1/orders"}, 401)
	summary := func(a int64) string { return fmt.Sprintf("/admin/v1/activities/%d/summary", a) }
	sc.do(base, specCall{method: "GET", path: summary(open), token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: summary(cold), token: admin}, 200) // redis_stock null
	sc.do(base, specCall{method: "GET", path: summary(999999999), token: admin}, 404)
	sc.do(base, specCall{method: "GET", path: summary(open), token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: summary(open)}, 401)
	sc.do(base, specCall{method: "POST", path: orderPath(unknownOrder) + "/pay", token: buyer}, 404)
	sc.do(base, specCall{method: "POST", path: orderPath(unknownOrder) + "/cancel", token: buyer}, 404)
	sc.do(base, specCall{method: "POST", path: orderPath(first) + "/pay"}, 401)
	sc.do(base, specCall{method: "POST", path: orderPath(first) + "/cancel"}, 401)

	// Payment notifications: signed by the provider, no token.
	notify := func(tx, no string, amount int, sign bool) specCall {
		body := fmt.Sprintf(`{"transaction_id":%q,"order_no":%q,"amount":%d,"currency":"EUR"}`, tx, no, amount)
		c := specCall{method: "POST", path: "/payments/v1/notifications", body: body}
		if sign {
			c.header = map[string]string{payment.Header: payment.Sign([]byte(pipelinetest.PaymentSecret), []byte(body), time.Now())}
		}
		return c
	}
	sc.do(base, notify("spec-1", second, 1999, true), 200) // CLOSED: a refund owed
	sc.do(base, notify("spec-1", second, 1999, true), 200) // the same again
	sc.do(base, notify("spec-2", second, 1999, false), 401)
	sc.do(base, notify("spec-3", second, 1, true), 422)
	sc.do(base, notify("spec-4", unknownOrder, 1999, true), 404)
	sc.do(base, notify("", second, 1999, true), 400)
	if b := sc.do(base, specCall{method: "GET", path: summary(open), token: admin}, 200); !strings.Contains(string(b), `"refunds_needed":1`) {
		t.Errorf("summary after a late payment: %s", b)
	}

	// A sale in sizes: items with labels (one with its own price), an
	// order names its size, one live order per buyer across the sizes.
	size := func(name string, stock int) int64 {
		return id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin,
			body: fmt.Sprintf(`{"name":%q,"stock":%d,"price":12900,"currency":"EUR"}`, name, stock)}, 201), "item_id")
	}
	eu41, eu42, eu43 := size("EU 41", 2), size("EU 42", 0), size("EU 43", 2)
	times := fmt.Sprintf(`"starts_at":%q,"ends_at":%q`, now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	items := fmt.Sprintf(`"items":[{"item_id":%d,"label":"EU 41"},{"item_id":%d,"label":"EU 42","sale_price":9900},{"item_id":%d,"label":"EU 43"}]`,
		eu41, eu42, eu43)
	var created struct {
		ItemID int64 `json:"item_id"`
		Items  []struct {
			ItemID    int64  `json:"item_id"`
			Label     string `json:"label"`
			SalePrice int64  `json:"sale_price"`
		} `json:"items"`
	}
	createdBody := sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: "{" + items + "," + times + "}"}, 201)
	if err := json.Unmarshal(createdBody, &created); err != nil {
		t.Fatal(err)
	}
	if created.ItemID != eu41 || len(created.Items) != 3 || created.Items[1].Label != "EU 42" || created.Items[1].SalePrice != 9900 ||
		created.Items[2].SalePrice != 12900 {
		t.Errorf("the created sale in sizes: %s", createdBody)
	}
	sized := id(createdBody, "activity_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: fmt.Sprintf(`{"item_id":%d,%s,%s}`, eu41, items, times)}, 400) // item_id and items
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: fmt.Sprintf(`{%s,"sale_price":100,%s}`, items, times)}, 400) // one sale_price for several items
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: fmt.Sprintf(`{"items":[{"item_id":%d,"label":"x"},{"item_id":999999999,"label":"y"}],%s}`, eu41, times)}, 404)
	sc.do(base, specCall{method: "POST", path: warm(sized), token: admin}, 200)
	var page struct {
		State     string `json:"state"`
		UnitsLeft int64  `json:"units_left"`
		Items     []struct {
			ItemID    int64  `json:"item_id"`
			Label     string `json:"label"`
			UnitsLeft int64  `json:"units_left"`
			State     string `json:"state"`
		} `json:"items"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: salePage(sized)}, 200), &page); err != nil {
		t.Fatal(err)
	}
	if page.State != "LIVE" || page.UnitsLeft != 4 || len(page.Items) != 3 || page.Items[1].State != "SOLD_OUT" ||
		page.Items[2].Label != "EU 43" || page.Items[2].UnitsLeft != 2 || page.Items[2].State != "LIVE" {
		t.Errorf("the sale page of a sale in sizes: %+v", page)
	}
	placeSize := func(token, key string, item int64) specCall {
		c := place(token, key, sized)
		c.body = fmt.Sprintf(`{"activity_id":%d,"item_id":%d,"quantity":1}`, sized, item)
		return c
	}
	sc.do(base, place(buyer, "s-none", sized), 400)       // no item_id
	sc.do(base, placeSize(buyer, "s-foreign", item), 400) // not one of its items
	sc.do(base, placeSize(buyer, "s-gone", eu42), 409)    // SOLD_OUT: that size only
	sizedNo := no(sc.do(base, placeSize(buyer, "s-1", eu43), 202))
	sc.do(base, placeSize(buyer, "s-2", eu41), 409)  // ALREADY_PURCHASED: another size
	sc.do(base, placeSize(buyer, "s-1", eu41), 422)  // IDEMPOTENCY_KEY_REUSED
	sc.do(base, placeSize(buyerB, "s-3", eu41), 202) // the other sizes still sell
	p.WaitFinal(map[string]int64{sizedNo: 10}, 30*time.Second)
	var sizedOrder struct {
		ItemID    int64  `json:"item_id"`
		Label     string `json:"label"`
		UnitPrice int64  `json:"unit_price"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: orderPath(sizedNo), token: buyer}, 200), &sizedOrder); err != nil {
		t.Fatal(err)
	}
	if sizedOrder.ItemID != eu43 || sizedOrder.Label != "EU 43" || sizedOrder.UnitPrice != 12900 {
		t.Errorf("the order of a size: %+v, want item %d EU 43 at 12900", sizedOrder, eu43)
	}
	var sizedSummary struct {
		Items []struct {
			ItemID int64  `json:"item_id"`
			Label  string `json:"label"`
		} `json:"items"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: summary(sized), token: admin}, 200), &sizedSummary); err != nil {
		t.Fatal(err)
	}
	if len(sizedSummary.Items) != 3 || sizedSummary.Items[0].ItemID != eu41 || sizedSummary.Items[2].Label != "EU 43" {
		t.Errorf("the summary of a sale in sizes: %+v", sizedSummary)
	}

	// A sale with a waiting room: create it, join, poll, order with and
	// without the admission.
	roomItem := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"ticket","stock":2}`}, 201), "item_id")
	withRoom := func(room string) string {
		return strings.TrimSuffix(activity(roomItem, now.Add(-time.Minute), now.Add(time.Hour)), "}") + `,"waiting_room":` + room + `}`
	}
	roomSale := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: withRoom(`{"admit_per_second":100,"proof_of_work_bits":1}`)}, 201), "activity_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: withRoom(`{"admission_ttl_seconds":60}`)}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: withRoom(`{"admit_per_second":1,"other":1}`)}, 400)
	sc.do(base, specCall{method: "POST", path: warm(roomSale), token: admin}, 200)
	queuePath := fmt.Sprintf("/api/v1/activities/%d/queue", roomSale)
	var ch struct {
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: queuePath + "/challenge", token: buyer}, 200), &ch); err != nil {
		t.Fatal(err)
	}
	solution := pipelinetest.Solve(ch.Challenge, 1)
	sc.do(base, specCall{method: "GET", path: queuePath, token: buyer}, 404)  // not joined yet
	sc.do(base, specCall{method: "POST", path: queuePath, token: buyer}, 400) // no proof of work
	sc.do(base, specCall{method: "POST", path: queuePath, token: buyer, body: fmt.Sprintf(`{"challenge":%q,"solution":%q}`, ch.Challenge, solution)}, 200)
	sc.do(base, specCall{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/queue", open), token: buyer}, 404) // no room
	sc.do(base, specCall{method: "GET", path: queuePath}, 401)
	var adm struct {
		State     string `json:"state"`
		Admission string `json:"admission"`
	}
	waittest.Until(t, 5*time.Second, "the buyer admitted", func() bool {
		err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: queuePath, token: buyer}, 200), &adm)
		return err == nil && adm.State == "ADMITTED"
	})
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/sale/%d", roomSale)}, 200) // the waiting page
	sc.do(base, specCall{method: "GET", path: "/sale/x"}, 404)
	sc.do(base, specCall{method: "GET", path: "/static/sale.js"}, 200)
	sc.do(base, specCall{method: "GET", path: "/static/sale.css"}, 200)
	sc.do(base, place(buyer, "room-0", roomSale), 403) // NOT_ADMITTED: no X-Admission
	roomOrder := place(buyer, "room-1", roomSale)
	roomOrder.header["X-Admission"] = adm.Admission
	sc.do(base, roomOrder, 202)
	// The key a shop verifies the room's admissions with.
	roomKey := fmt.Sprintf("/admin/v1/activities/%d/room/key", roomSale)
	sc.do(base, specCall{method: "GET", path: roomKey, token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/room/key", open), token: admin}, 404) // no room
	sc.do(base, specCall{method: "GET", path: roomKey, token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: roomKey}, 401)

	// Steering the room live: a pause (a buyer who joins meanwhile is told
	// so), refusals, a resume; the audit of it.
	roomPath := fmt.Sprintf("/admin/v1/activities/%d/room", roomSale)
	// The room as the console reads it: the one buyer joined and admitted.
	var rs struct {
		Joined, Admitted, Waiting int64
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: roomPath, token: admin}, 200), &rs); err != nil ||
		rs.Joined != 1 || rs.Admitted != 1 || rs.Waiting != 0 {
		t.Fatalf("the room's state: %+v %v, want 1 joined and admitted", rs, err)
	}
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/admin/v1/activities/%d/room", open), token: admin}, 409)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities/999999999/room", token: admin}, 404)
	sc.do(base, specCall{method: "GET", path: roomPath, token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: roomPath}, 401)
	sc.do(base, specCall{method: "PATCH", path: roomPath, token: admin, body: `{"paused":true}`}, 200)
	sc.do(base, specCall{method: "PATCH", path: roomPath, token: admin, body: `{"paused":true,"passthrough":true}`}, 400)
	sc.do(base, specCall{method: "PATCH", path: fmt.Sprintf("/admin/v1/activities/%d/room", open), token: admin, body: `{"paused":true}`}, 409)
	sc.do(base, specCall{method: "PATCH", path: "/admin/v1/activities/999999999/room", token: admin, body: `{"paused":true}`}, 404)
	sc.do(base, specCall{method: "PATCH", path: roomPath, token: buyer, body: `{"paused":true}`}, 403)
	sc.do(base, specCall{method: "PATCH", path: roomPath, body: `{"paused":true}`}, 401)
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: queuePath + "/challenge", token: buyerB}, 200), &ch); err != nil {
		t.Fatal(err)
	}
	sc.do(base, specCall{method: "POST", path: queuePath, token: buyerB,
		body: fmt.Sprintf(`{"challenge":%q,"solution":%q}`, ch.Challenge, pipelinetest.Solve(ch.Challenge, 1))}, 200)
	waittest.Until(t, 5*time.Second, "the waiter told the room is paused", func() bool {
		var q struct {
			Paused bool `json:"paused"`
		}
		err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: queuePath, token: buyerB}, 200), &q)
		return err == nil && q.Paused
	})
	sc.do(base, specCall{method: "PATCH", path: roomPath, token: admin, body: `{"paused":false,"admit_per_second":50}`}, 200)
	auditPath := fmt.Sprintf("/admin/v1/activities/%d/audit", roomSale)
	sc.do(base, specCall{method: "GET", path: auditPath + "?limit=1", token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: auditPath + "?before=x", token: admin}, 400)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities/999999999/audit", token: admin}, 404)
	sc.do(base, specCall{method: "GET", path: auditPath, token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: auditPath}, 401)

	// Presale codes on the open sale: generate, import, the summary,
	// revoke, and the refusals.
	codesPath := fmt.Sprintf("/admin/v1/activities/%d/codes", open)
	var gen struct {
		Codes []string `json:"codes"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "POST", path: codesPath, token: admin, body: `{"count":2,"uses":1}`}, 201), &gen); err != nil || len(gen.Codes) != 2 {
		t.Fatalf("generated codes: %v %v", gen.Codes, err)
	}
	sc.do(base, specCall{method: "POST", path: codesPath, token: admin, body: `{"codes":["SPEC-0001"],"uses":2}`}, 201)
	sc.do(base, specCall{method: "POST", path: codesPath, token: admin, body: `{"codes":["SPEC-0001"],"uses":2}`}, 409)
	sc.do(base, specCall{method: "POST", path: codesPath, token: admin, body: `{"count":0,"uses":1}`}, 400)
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities/999999999/codes", token: admin, body: `{"count":1,"uses":1}`}, 404)
	sc.do(base, specCall{method: "POST", path: codesPath, token: buyer, body: `{"count":1,"uses":1}`}, 403)
	sc.do(base, specCall{method: "POST", path: codesPath, body: `{"count":1,"uses":1}`}, 401)
	sc.do(base, specCall{method: "GET", path: codesPath, token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities/999999999/codes", token: admin}, 404)
	sc.do(base, specCall{method: "DELETE", path: codesPath + "/" + gen.Codes[0], token: admin}, 204)
	sc.do(base, specCall{method: "DELETE", path: codesPath + "/NEVER-GIVEN", token: admin}, 404)

	// A draw sale: enter, enter again, the buyer's entry, the record
	// before and after the draw (the consumer draws it at the close).
	drawItem := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/items", token: admin, body: `{"name":"sneaker","stock":1}`}, 201), "item_id")
	withDraw := func(closes time.Time) string {
		return strings.TrimSuffix(activity(drawItem, now.Add(-time.Minute), now.Add(time.Hour)), "}") +
			fmt.Sprintf(`,"mode":"draw","entries_close_at":%q}`, closes.Format(time.RFC3339Nano))
	}
	closes := time.Now().Add(4 * time.Second)
	drawSale := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: withDraw(closes)}, 201), "activity_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin, body: withDraw(now.Add(2 * time.Hour))}, 400) // after ends_at
	sc.do(base, specCall{method: "POST", path: "/admin/v1/activities", token: admin,
		body: strings.TrimSuffix(withDraw(closes), "}") + `,"mode":"lottery"}`}, 400)
	sc.do(base, specCall{method: "POST", path: warm(drawSale), token: admin}, 200)
	entries := fmt.Sprintf("/api/v1/activities/%d/entries", drawSale)
	drawPath := fmt.Sprintf("/api/v1/activities/%d/draw", drawSale)
	sc.do(base, specCall{method: "GET", path: drawPath}, 200) // OPEN: the commitment only
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/api/v1/activities/%d", drawSale)}, 200)
	sc.do(base, specCall{method: "GET", path: entries + "/me", token: buyer}, 404)
	sc.do(base, specCall{method: "POST", path: entries, token: buyer, body: `{"quantity":0}`}, 400)
	sc.do(base, specCall{method: "POST", path: entries, token: buyer, body: `{"quantity":1}`}, 201)
	sc.do(base, specCall{method: "POST", path: entries, token: buyer}, 200) // entered already
	sc.do(base, specCall{method: "POST", path: entries, token: buyerB, body: `{}`}, 201)
	sc.do(base, specCall{method: "POST", path: entries}, 401)
	sc.do(base, specCall{method: "POST", path: fmt.Sprintf("/api/v1/activities/%d/entries", open), token: buyer}, 404) // not a draw
	sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/api/v1/activities/%d/draw", open)}, 404)
	sc.do(base, specCall{method: "GET", path: entries + "/me", token: buyer}, 200)
	sc.do(base, place(buyer, "draw-direct", drawSale), 409) // DRAW_SALE
	var rec struct {
		State string `json:"state"`
	}
	waittest.Until(t, 30*time.Second, "the draw drawn", func() bool {
		err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: drawPath}, 200), &rec)
		return err == nil && rec.State == "DRAWN"
	})
	sc.do(base, specCall{method: "POST", path: entries, token: pipelinetest.Token(12, ""), body: `{}`}, 409) // closed
	var mine struct {
		State string `json:"state"`
	}
	waittest.Until(t, 30*time.Second, "the buyers' entries WON or ALTERNATE", func() bool {
		a := json.Unmarshal(sc.do(base, specCall{method: "GET", path: entries + "/me", token: buyer}, 200), &mine)
		sa := mine.State
		b := json.Unmarshal(sc.do(base, specCall{method: "GET", path: entries + "/me", token: buyerB}, 200), &mine)
		return a == nil && b == nil && (sa == "WON" && mine.State == "ALTERNATE" || sa == "ALTERNATE" && mine.State == "WON")
	})

	// Changing a sale before it starts; ending and cancelling one.
	actPath := func(a int64) string { return fmt.Sprintf("/admin/v1/activities/%d", a) }
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: admin, body: `{"per_user_limit":2}`}, 200)
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: admin, body: `{"waiting_room":{"admit_per_second":5}}`}, 200)
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: admin, body: `{"stock_buckets":2}`}, 400) // not with a room
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: admin,
		body: fmt.Sprintf(`{"ends_at":%q}`, now.Add(30*time.Minute).Format(time.RFC3339))}, 400) // before starts_at
	sc.do(base, specCall{method: "PATCH", path: actPath(open), token: admin, body: `{"per_user_limit":2}`}, 409)
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: admin, // into open's window
		body: fmt.Sprintf(`{"starts_at":%q}`, now.Add(30*time.Minute).Format(time.RFC3339))}, 409)
	sc.do(base, specCall{method: "PATCH", path: actPath(999999999), token: admin, body: `{"per_user_limit":2}`}, 404)
	sc.do(base, specCall{method: "PATCH", path: actPath(future), token: buyer, body: `{"per_user_limit":2}`}, 403)
	sc.do(base, specCall{method: "PATCH", path: actPath(future), body: `{"per_user_limit":2}`}, 401)
	sc.do(base, specCall{method: "POST", path: actPath(future) + "/end", token: admin}, 409)
	sc.do(base, specCall{method: "POST", path: actPath(future) + "/cancel", token: admin}, 409)
	sc.do(base, specCall{method: "POST", path: actPath(999999999) + "/end", token: admin}, 404)
	sc.do(base, specCall{method: "POST", path: actPath(open) + "/end", token: buyer}, 403)
	sc.do(base, specCall{method: "POST", path: actPath(open) + "/cancel"}, 401)
	sc.do(base, specCall{method: "POST", path: actPath(cold) + "/end", token: admin}, 200)
	sc.do(base, specCall{method: "POST", path: actPath(open) + "/cancel", token: admin}, 200)

	// The per-user bucket (1/s, burst 2) runs dry.
	limitedCall := specCall{method: "GET", path: orderPath(unknownOrder), token: pipelinetest.Token(99, "")}
	sc.do(limited.URL, limitedCall, 404)
	sc.do(limited.URL, limitedCall, 404)
	sc.do(limited.URL, limitedCall, 429)

	// Webhook endpoints.
	hook := id(sc.do(base, specCall{method: "POST", path: "/admin/v1/webhooks", token: admin,
		body: `{"url":"http://127.0.0.1:9/hook","events":["order.*"]}`}, 201), "webhook_id")
	sc.do(base, specCall{method: "POST", path: "/admin/v1/webhooks", token: admin, body: `{"url":"ftp://x","events":["*"]}`}, 400)
	hookPath := fmt.Sprintf("/admin/v1/webhooks/%d", hook)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/webhooks", token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: hookPath, token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/webhooks/999999999", token: admin}, 404)
	sc.do(base, specCall{method: "PATCH", path: hookPath, token: admin, body: `{"enabled":false}`}, 200)
	sc.do(base, specCall{method: "POST", path: hookPath + "/rotate", token: admin, body: `{"overlap_seconds":60}`}, 200)
	sc.do(base, specCall{method: "POST", path: hookPath + "/replay", token: admin,
		body: fmt.Sprintf(`{"since":%q}`, now.Add(-time.Hour).Format(time.RFC3339))}, 202)
	sc.do(base, specCall{method: "GET", path: hookPath + "/deliveries", token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: hookPath + "/deliveries?state=bogus", token: admin}, 400)
	sc.do(base, specCall{method: "DELETE", path: hookPath, token: admin}, 204)
	sc.do(base, specCall{method: "DELETE", path: hookPath, token: admin}, 404)

	// The console and the list of sales it shows: newest first, a full
	// page pointing at the next.
	sc.do(base, specCall{method: "GET", path: "/console"}, 200)
	sc.do(base, specCall{method: "GET", path: "/console/console.js"}, 200)
	sc.do(base, specCall{method: "GET", path: "/console/console.css"}, 200)
	sc.do(base, specCall{method: "GET", path: "/console/config.json"}, 200)
	sc.do(base, specCall{method: "GET", path: "/console/nope.js"}, 404)
	var list struct {
		Activities []struct {
			ActivityID  int64 `json:"activity_id"`
			WaitingRoom bool  `json:"waiting_room"`
			UnitsLeft   int64 `json:"units_left"`
		} `json:"activities"`
		NextBefore *int64 `json:"next_before"`
	}
	if err := json.Unmarshal(sc.do(base, specCall{method: "GET", path: fmt.Sprintf("/admin/v1/activities?limit=1&before=%d", roomSale+1), token: admin}, 200), &list); err != nil ||
		len(list.Activities) != 1 || list.Activities[0].ActivityID != roomSale || !list.Activities[0].WaitingRoom ||
		list.Activities[0].UnitsLeft != 1 || list.NextBefore == nil || *list.NextBefore != roomSale {
		t.Fatalf("the list's page before %d: %+v %v, want the room sale with 1 unit left of 2", roomSale+1, list, err)
	}
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities", token: admin}, 200)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities?limit=101", token: admin}, 400)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities", token: buyer}, 403)
	sc.do(base, specCall{method: "GET", path: "/admin/v1/activities"}, 401)

	// Answers no operation declares still have the error shape.
	sc.errorShape(base, specCall{method: "GET", path: "/no/such/route"}, 404, "NOT_FOUND")
	sc.errorShape(base, specCall{method: "DELETE", path: "/api/v1/orders"}, 405, "METHOD_NOT_ALLOWED")

	// Every operation of the spec was exercised, each with a success.
	var ops, untested []string
	for path, item := range sc.doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			ops = append(ops, key)
			ok := false
			for code := range sc.seen[key] {
				ok = ok || code < 300
			}
			if !ok {
				t.Errorf("%s: no success answer exercised", key)
			}
			for code := range op.Responses.Map() {
				var n int
				if _, err := fmt.Sscan(code, &n); err == nil && !sc.seen[key][n] {
					untested = append(untested, key+" "+code)
				}
			}
		}
	}
	sort.Strings(untested)
	t.Logf("%d operations checked; declared but not produced here: %s", len(ops), strings.Join(untested, ", "))
}

// waitHealthy polls base/healthz until it answers 200.
func waitHealthy(t *testing.T, base string) {
	t.Helper()
	waittest.Until(t, 60*time.Second, base+" to be healthy", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}
