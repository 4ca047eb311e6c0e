//go:build console

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// kcAdmin is an access token of Keycloak's bootstrap administrator
// (scripts/services.d/keycloak.sh sets admin/admin), for the realm's
// set-up the test needs.
func kcAdmin(t *testing.T) string {
	t.Helper()
	resp, err := http.PostForm(keycloakURL()+"/realms/master/protocol/openid-connect/token", url.Values{
		"grant_type": {"password"}, "client_id": {"admin-cli"}, "username": {"admin"}, "password": {"admin"}})
	if err != nil {
		t.Fatalf("Keycloak at %s does not answer (run `scripts/services up keycloak`): %v", keycloakURL(), err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.AccessToken == "" {
		t.Fatalf("Keycloak's administrator: %d %v", resp.StatusCode, err)
	}
	return body.AccessToken
}

// kcDo sends an admin REST request to the realm shop and returns the
// status and body.
func kcDo(t *testing.T, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, keycloakURL()+"/admin/realms/shop"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// ensureConsoleClient adds the realm file's client seckill-console to a
// realm imported before it had one (Keycloak imports a realm only once);
// the file stays its one description.
func ensureConsoleClient(t *testing.T, admin string) {
	t.Helper()
	code, b := kcDo(t, admin, "GET", "/clients?clientId=seckill-console", nil)
	if code == 200 && !bytes.Equal(bytes.TrimSpace(b), []byte("[]")) {
		return
	}
	raw, err := os.ReadFile("../scripts/keycloak/shop-realm.json")
	if err != nil {
		t.Fatal(err)
	}
	var realm struct {
		Clients []map[string]any `json:"clients"`
	}
	if err := json.Unmarshal(raw, &realm); err != nil {
		t.Fatal(err)
	}
	for _, c := range realm.Clients {
		if c["clientId"] == "seckill-console" {
			if code, b := kcDo(t, admin, "POST", "/clients", c); code != 201 && code != 409 {
				t.Fatalf("add the console's client: %d %s", code, b)
			}
			return
		}
	}
	t.Fatal("scripts/keycloak/shop-realm.json has no client seckill-console")
}

// crowdUser makes (once) a buyer of the realm, shaped like its buyer.
func crowdUser(t *testing.T, admin, name string) {
	t.Helper()
	code, b := kcDo(t, admin, "POST", "/users", map[string]any{
		"username": name, "enabled": true, "email": name + "@shop.invalid", "emailVerified": true, "firstName": "Crowd", "lastName": name,
		"credentials": []map[string]any{{"type": "password", "value": name + "-password", "temporary": false}}})
	if code != 201 && code != 409 {
		t.Fatalf("add the buyer %s: %d %s", name, code, b)
	}
}

// shots keeps the console's screenshots: in $SECKILL_SCREENSHOTS, else in
// a folder the test names in its log (kept after the test, for a look).
type shots struct {
	t   *testing.T
	dir string
	n   int
}

func newShots(t *testing.T) *shots {
	dir := os.Getenv("SECKILL_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "seckill-console-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("the console's screenshots go to %s", dir)
	return &shots{t: t, dir: dir}
}

func (s *shots) take(ctx context.Context, name string) {
	s.t.Helper()
	s.n++
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, fmt.Sprintf("%d-%s.png", s.n, name)), png, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// run runs browser actions, failing the test with what on an error.
func run(t *testing.T, ctx context.Context, what string, within time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#view")))
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			name := filepath.Join(t.TempDir(), "failed.png")
			if os.WriteFile(name, png, 0o644) == nil && os.Getenv("SECKILL_SCREENSHOTS") != "" {
				name = filepath.Join(os.Getenv("SECKILL_SCREENSHOTS"), "failed.png")
				_ = os.WriteFile(name, png, 0o644)
			}
		}
		t.Fatalf("%s: %v; the page says: %s", what, err, msg)
	}
}

// watchedTab is a tab whose console the test reads: an uncaught exception
// or a refusal by the page's Content Security Policy is a bug of the
// console the screens may not show.
type watchedTab struct {
	ctx context.Context
	mu  sync.Mutex
	bad []string
}

// watchTab opens url in a new tab of b, watching its console from the
// start.
func watchTab(t *testing.T, b context.Context, url string) *watchedTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b)
	t.Cleanup(cancel)
	w := &watchedTab{ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				w.mu.Lock()
				w.bad = append(w.bad, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				w.mu.Unlock()
			}
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return w
}

// check fails the test for what the tab's console reported.
func (w *watchedTab) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) > 0 {
		t.Fatalf("the console's page reported:\n%s", strings.Join(w.bad, "\n"))
	}
}

// location is the tab's address.
func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// confirm answers the console's confirmation yes, after checking it says
// what it will do.
func confirm(t *testing.T, ctx context.Context, says string) {
	t.Helper()
	run(t, ctx, "the confirmation", 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#confirm[open]")))
	if got := text(t, ctx, "#confirm-text"); !strings.Contains(got, says) {
		t.Fatalf("the confirmation says %q, want it to say %q", got, says)
	}
	run(t, ctx, "confirm", 10*time.Second, chromedp.Click(chromedp.CSS("#confirm-yes")))
}

// waitText waits until sel's text is want, the page refreshing itself.
func waitText(t *testing.T, ctx context.Context, sel, want string, within time.Duration) {
	t.Helper()
	waittest.Until(t, within, fmt.Sprintf("%s to read %q", sel, want), func() bool { return text(t, ctx, sel) == want })
}

// An operator runs a drop from the console in a real browser: signs in
// at Keycloak (code flow with PKCE), creates a sale in three sizes with a
// waiting room, warms it up, watches a crowd of Keycloak buyers buy it out
// (the live view's figures equal the API's), changes the room's rate,
// pauses and resumes it, ends the sale and reads its summary and audit. A screenshot of each step.
func TestConsoleOperatorRunsADrop(t *testing.T) {
	kc := keycloakURL()
	admin := kcAdmin(t)
	ensureConsoleClient(t, admin)
	const crowd = 14
	for i := range crowd {
		crowdUser(t, admin, fmt.Sprintf("crowd%02d", i))
	}
	operator := signIn(t, "operator", "operator-password")

	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI(append(keycloakEnv(kc), "SECKILL_CONSOLE_CLIENT_ID=seckill-console", "SECKILL_BUYER_PAY=true")...)
	var (
		mu     sync.Mutex
		tokens = map[string]string{}
	)
	api.Mint = func(sub, role string) string {
		if role == auth.RoleAdmin {
			return operator
		}
		mu.Lock()
		defer mu.Unlock()
		return tokens[sub]
	}
	p.StartConsumer()
	b := browser(t)
	shot := newShots(t)

	// Sign in: the console sends the operator to Keycloak and back.
	watched := watchTab(t, b, api.URL+"/console")
	ctx := watched.ctx
	run(t, ctx, "the viewport", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	run(t, ctx, "the sign-in button", 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#sign-in")))
	shot.take(ctx, "sign-in")
	run(t, ctx, "sign in at Keycloak", 30*time.Second,
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "operator"),
		chromedp.SendKeys(chromedp.CSS("#password"), "operator-password"),
		chromedp.Click(chromedp.CSS("#kc-login")),
		chromedp.WaitVisible(chromedp.CSS(`body[data-signed-in="yes"] #sales`)))
	if got := text(t, ctx, "#who"); got != "Signed in as operator" {
		t.Fatalf("the console says %q", got)
	}
	loc := location(t, ctx)
	if strings.Contains(loc, "code=") || strings.Contains(loc, "token") {
		t.Fatalf("the address keeps the sign-in's code or token: %s", loc)
	}
	shot.take(ctx, "sales")

	// A sale in three sizes with a room, from now for an hour. A form
	// that the API would refuse is refused before anything is sent.
	run(t, ctx, "the new sale's form", 10*time.Second,
		chromedp.Click(chromedp.CSS(`nav a[href="#/new"]`)),
		chromedp.WaitVisible(chromedp.CSS("#create")),
		chromedp.Click(chromedp.CSS("#create-sale")),
		chromedp.WaitVisible(chromedp.CSS("#form-errors li")))
	if got := text(t, ctx, "#form-errors"); !strings.Contains(got, "The name is 1-150 characters.") {
		t.Fatalf("an empty name: the form says %q", got)
	}
	stocks := []string{"5", "3", "2"}
	actions := []chromedp.Action[chromedp.Void]{chromedp.SendKeys(chromedp.CSS("#sale-name"), "console high-top")}
	for i, s := range stocks {
		sel := fmt.Sprintf("#sizes-rows .size-row:nth-child(%d) .size-stock", i+1)
		actions = append(actions, chromedp.SetValue(chromedp.CSS(sel), s))
	}
	// The window: from this minute (the form's inputs take minutes) for
	// an hour, in the browser's time zone.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const d = new Date(), p = (n) => String(n).padStart(2, '0');
			document.getElementById('sale-starts').value = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
			const e = new Date(d.getTime() + 3600e3);
			document.getElementById('sale-ends').value = e.getFullYear() + '-' + p(e.getMonth() + 1) + '-' + p(e.getDate()) + 'T' + p(e.getHours()) + ':' + p(e.getMinutes());
			return true; })()`)); err != nil {
		t.Fatalf("set the window: %v", err)
	}
	actions = append(actions,
		chromedp.Click(chromedp.CSS("#mode-room")),
		chromedp.WaitVisible(chromedp.CSS("#room-rate")),
		chromedp.SetValue(chromedp.CSS("#room-rate"), "0"))
	run(t, ctx, "fill the form", 10*time.Second, actions...)
	run(t, ctx, "a refused rate", 10*time.Second, chromedp.Click(chromedp.CSS("#create-sale")),
		chromedp.WaitVisible(chromedp.CSS(`#room-rate[aria-invalid="true"]`)))
	run(t, ctx, "a good rate", 10*time.Second, chromedp.SetValue(chromedp.CSS("#room-rate"), "20"),
		chromedp.SetValue(chromedp.CSS("#room-pow"), "0"))
	shot.take(ctx, "new-sale")
	// Two clicks at once send once: one sale.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const b = document.getElementById('create-sale'); b.click(); b.click(); return true; })()`)); err != nil {
		t.Fatalf("click create twice: %v", err)
	}
	run(t, ctx, "the new sale's live view", 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#live-state")))
	loc = location(t, ctx)
	id, err := strconv.ParseInt(loc[strings.LastIndex(loc, "/")+1:], 10, 64)
	if err != nil {
		t.Fatalf("the live view's address %s: %v", loc, err)
	}
	var list struct {
		Activities []struct {
			ActivityID int64 `json:"activity_id"`
		} `json:"activities"`
	}
	if code, err := api.DoAs("GET", "/admin/v1/activities", "", auth.RoleAdmin, nil, nil, &list); err != nil || code != 200 ||
		len(list.Activities) != 1 || list.Activities[0].ActivityID != id {
		t.Fatalf("the sales after two clicks on create: %d %v %+v, want sale %d alone", code, err, list, id)
	}

	// Warm it up from the console, then the crowd buys it out.
	run(t, ctx, "warm up", 10*time.Second, chromedp.Click(chromedp.CSS("#action-warmup")))
	confirm(t, ctx, "Loads the sale's stock into Redis now")
	waitText(t, ctx, "#live-units-left", "10", 15*time.Second)
	waitText(t, ctx, "#live-state", "LIVE", 15*time.Second)
	shot.take(ctx, "live")

	var sale struct {
		Items []struct {
			ItemID int64 `json:"item_id"`
		} `json:"items"`
	}
	if code, err := api.DoAs("GET", fmt.Sprintf("/api/v1/activities/%d", id), "", "", nil, nil, &sale); err != nil || code != 200 || len(sale.Items) != 3 {
		t.Fatalf("the sale page: %d %v %+v", code, err, sale)
	}
	subs := make([]string, crowd)
	for i := range crowd {
		name := fmt.Sprintf("crowd%02d", i)
		tok := signIn(t, name, name+"-password")
		subs[i] = subjectOf(t, tok)
		tokens[subs[i]] = tok
	}
	var (
		wg      sync.WaitGroup
		orders  = map[string]int64{}
		refused = map[string]int{}
	)
	queuePath := fmt.Sprintf("/api/v1/activities/%d/queue", id)
	for i, sub := range subs {
		wg.Go(func() {
			if code, err := api.DoAs("POST", queuePath, sub, "", nil, map[string]any{}, nil); err != nil || code != 200 {
				t.Errorf("buyer %d joins: %d %v", i, code, err)
				return
			}
			var q struct {
				State     string `json:"state"`
				Admission string `json:"admission"`
			}
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := api.DoAs("GET", queuePath, sub, "", nil, nil, &q); err != nil {
					t.Error(err)
					return
				}
				if q.State != "WAITING" {
					break
				}
				time.Sleep(200 * time.Millisecond) // a buyer's poll pace, not a wait for a condition
			}
			if q.State != "ADMITTED" {
				mu.Lock()
				refused[q.State]++
				mu.Unlock()
				return
			}
			for k := range sale.Items {
				item := sale.Items[(i+k)%len(sale.Items)].ItemID
				pl, err := api.PlaceOrderAdmitted(sub, fmt.Sprintf("crowd-%d-%d", i, k), id, item, 1, q.Admission)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if pl.Code == 202 {
					orders[pl.OrderNo] = item
				} else {
					refused[pl.Error]++
				}
				mu.Unlock()
				if pl.Code == 202 || pl.Error != "SOLD_OUT" {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(orders) != 10 {
		t.Fatalf("the crowd of %d got %d orders of 10 units (refusals %v)", crowd, len(orders), refused)
	}
	p.WaitFinal(orders, 60*time.Second)

	// The live view shows what the API says.
	var sum struct {
		Orders     map[string]int64 `json:"orders"`
		RedisStock *int64           `json:"redis_stock"`
		Items      []struct {
			ItemID     int64  `json:"item_id"`
			RedisStock *int64 `json:"redis_stock"`
			UnitsSold  int64  `json:"units_sold"`
		} `json:"items"`
	}
	summaryPath := fmt.Sprintf("/admin/v1/activities/%d/summary", id)
	waittest.Until(t, 30*time.Second, "the API's summary to show the sale sold out", func() bool {
		code, err := api.DoAs("GET", summaryPath, "", auth.RoleAdmin, nil, nil, &sum)
		return err == nil && code == 200 && sum.Orders["CREATED"] == 10 && sum.RedisStock != nil && *sum.RedisStock == 0
	})
	waitText(t, ctx, "#live-orders-created", "10", 15*time.Second)
	waitText(t, ctx, "#live-units-left", "0", 15*time.Second)
	waitText(t, ctx, "#live-state", "SOLD_OUT", 15*time.Second)
	for _, it := range sum.Items {
		row := fmt.Sprintf(`#sizes tr[data-item="%d"]`, it.ItemID)
		if got := text(t, ctx, row+" .units-left"); got != strconv.FormatInt(*it.RedisStock, 10) {
			t.Fatalf("size %d: the console shows %s left, the API %d", it.ItemID, got, *it.RedisStock)
		}
		if got := text(t, ctx, row+" .sold"); got != strconv.FormatInt(it.UnitsSold, 10) {
			t.Fatalf("size %d: the console shows %s sold, the API %d", it.ItemID, got, it.UnitsSold)
		}
	}
	var room struct {
		Joined   int64 `json:"joined"`
		Admitted int64 `json:"admitted"`
	}
	if code, err := api.DoAs("GET", fmt.Sprintf("/admin/v1/activities/%d/room", id), "", auth.RoleAdmin, nil, nil, &room); err != nil || code != 200 || room.Joined != crowd {
		t.Fatalf("the room: %d %v %+v, want %d joined", code, err, room, crowd)
	}
	waitText(t, ctx, "#room-joined", strconv.Itoa(crowd), 15*time.Second)
	waitText(t, ctx, "#room-admitted", strconv.FormatInt(room.Admitted, 10), 15*time.Second)
	shot.take(ctx, "sold-out")

	// Two buyers pay, for a revenue.
	paid := 0
	for no := range orders {
		if paid == 2 {
			break
		}
		for _, sub := range subs {
			if st, _, err := api.OrderStatusAs(sub, no); err == nil && st == "CREATED" {
				if code, err := api.DoAs("POST", "/api/v1/orders/"+no+"/pay", sub, "", nil, nil, nil); err != nil || code != 200 {
					t.Fatalf("pay %s: %d %v", no, code, err)
				}
				paid++
				break
			}
		}
	}

	// The room's rate, changed from the console.
	run(t, ctx, "change the rate", 10*time.Second,
		chromedp.SetValue(chromedp.CSS("#room-rate-input"), "7"), chromedp.Click(chromedp.CSS("#room-rate-change")))
	confirm(t, ctx, "admits 7 buyers a second")
	waitText(t, ctx, "#room-rate", "7", 15*time.Second)
	var rs struct {
		AdmitPerSecond int `json:"admit_per_second"`
	}
	if code, err := api.DoAs("GET", fmt.Sprintf("/admin/v1/activities/%d/room", id), "", auth.RoleAdmin, nil, nil, &rs); err != nil || code != 200 || rs.AdmitPerSecond != 7 {
		t.Fatalf("the room's rate after the change: %d %v %+v", code, err, rs)
	}
	shot.take(ctx, "room-rate")
	// A pause and a resume.
	run(t, ctx, "pause", 10*time.Second, chromedp.Click(chromedp.CSS("#room-pause")))
	confirm(t, ctx, "Nobody more is admitted until you resume")
	waitText(t, ctx, "#room-paused", "paused", 15*time.Second)
	waitText(t, ctx, "#room-pause", "Resume", 15*time.Second)
	run(t, ctx, "resume", 10*time.Second, chromedp.Click(chromedp.CSS("#room-pause")))
	confirm(t, ctx, "The room admits buyers again at its rate.")
	waitText(t, ctx, "#room-paused", "running", 15*time.Second)

	// End the sale; its summary and audit.
	run(t, ctx, "end", 10*time.Second, chromedp.Click(chromedp.CSS("#action-end")))
	confirm(t, ctx, "Every api instance refuses new orders within a second")
	waitText(t, ctx, "#live-state", "ENDED", 15*time.Second)
	waitText(t, ctx, "#summary-units-paid", "2", 15*time.Second)
	waitText(t, ctx, "#summary-units-sold", "10", 15*time.Second)
	waitText(t, ctx, "#summary-revenue", "258.00 EUR", 15*time.Second)
	waittest.Until(t, 15*time.Second, "the audit to list the operator's actions", func() bool {
		a := text(t, ctx, "#audit")
		return strings.Contains(a, "sale.create") && strings.Contains(a, "sale.warmup") && strings.Contains(a, "room.control") && strings.Contains(a, "sale.end")
	})
	if code, err := api.DoAs("GET", fmt.Sprintf("/api/v1/activities/%d", id), "", "", nil, nil, &struct{}{}); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	run(t, ctx, "scroll to the summary", 5*time.Second, chromedp.ScrollIntoView(chromedp.CSS("#summary")))
	shot.take(ctx, "ended")
	watched.check(t)
}

// The development sign-in (an admin token in the address, as `make run`
// prints it) opens the console and leaves the address; a buyer's token
// opens nothing. A restock sent by two clicks at once adds its units
// once; a restock of 0 is refused before it is sent; the cancel's
// confirmation says how many unpaid orders it closes and that the paid
// one stays paid, and it closes them.
func TestConsoleRestockAndCancel(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI("SECKILL_BUYER_PAY=true")
	p.StartConsumer()
	s := api.CreateSizedSale([]int64{2, 2}, 1)
	b := browser(t)
	shot := newShots(t)

	buyerTab := tab(t, b, api.URL+"/console#token="+pipelinetest.Token(1001, ""))
	run(t, buyerTab, "a buyer's sign-in refused", 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#sign-in-error")))
	if got := text(t, buyerTab, "#sign-in-error"); !strings.Contains(got, "does not hold the operators' role (admin in role)") {
		t.Fatalf("a buyer's token: the console says %q", got)
	}

	watched := watchTab(t, b, api.URL+"/console#token="+pipelinetest.Token(1, auth.RoleAdmin))
	ctx := watched.ctx
	run(t, ctx, "the viewport", 5*time.Second, chromedp.EmulateViewport(1280, 900))
	row := fmt.Sprintf(`#sales tr[data-activity="%d"]`, s.ActivityID)
	run(t, ctx, "the sales", 20*time.Second, chromedp.WaitVisible(chromedp.CSS(row)))
	if loc := location(t, ctx); strings.Contains(loc, "token") {
		t.Fatalf("the address keeps the token: %s", loc)
	}
	if got := text(t, ctx, row+" .units-left"); got != "4" {
		t.Fatalf("the list shows %s units left, want 4", got)
	}
	run(t, ctx, "the live view", 20*time.Second, chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.CSS("#live-state")))
	size := s.Items[0].ID
	sizeRow := fmt.Sprintf(`#sizes tr[data-item="%d"]`, size)
	waitText(t, ctx, sizeRow+" .units-left", "2", 15*time.Second)

	// A restock of 0 is refused before it is sent; one of 3 by two clicks
	// at once asks once and adds 3.
	input := fmt.Sprintf("#restock-%d", size)
	run(t, ctx, "a restock of 0", 10*time.Second, chromedp.SetValue(chromedp.CSS(input), "0"),
		chromedp.Click(chromedp.CSS(sizeRow+" button")), chromedp.WaitVisible(chromedp.CSS(input+`[aria-invalid="true"]`)))
	run(t, ctx, "a restock of 3", 10*time.Second, chromedp.SetValue(chromedp.CSS(input), "3"))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const b = document.querySelector('%s button'); b.click(); b.click(); return true; })()`, sizeRow))); err != nil {
		t.Fatal(err)
	}
	confirm(t, ctx, "Adds 3 units to size 1: in MySQL first, then in Redis")
	waitText(t, ctx, sizeRow+" .units-left", "5", 15*time.Second)
	var stock struct {
		DBStock int64 `json:"db_stock"`
	}
	if code, err := api.Do("GET", fmt.Sprintf("/admin/v1/items/%d/stock", size), 1, auth.RoleAdmin, nil, nil, &stock); err != nil || code != 200 || stock.DBStock != 5 {
		t.Fatalf("the size's stock after the restock: %d %v %+v, want 5 in MySQL", code, err, stock)
	}

	// Two orders, one paid; the cancel closes the other.
	accepted := map[string]int64{}
	for u := int64(2001); u <= 2002; u++ {
		pl, err := api.PlaceOrderItem(u, fmt.Sprintf("console-%d", u), s.ActivityID, size, 1)
		if err != nil || pl.Code != 202 {
			t.Fatalf("order of %d: %+v %v", u, pl, err)
		}
		accepted[pl.OrderNo] = u
	}
	p.WaitFinal(accepted, 60*time.Second)
	for no, u := range accepted {
		if code, err := api.Do("POST", "/api/v1/orders/"+no+"/pay", u, "", nil, nil, nil); err != nil || code != 200 {
			t.Fatalf("pay %s: %d %v", no, code, err)
		}
		break
	}
	waitText(t, ctx, "#live-orders-paid", "1", 15*time.Second)
	waitText(t, ctx, "#live-orders-created", "1", 15*time.Second)
	shot.take(ctx, "before-cancel")
	run(t, ctx, "cancel", 10*time.Second, chromedp.Click(chromedp.CSS("#action-cancel")))
	run(t, ctx, "the confirmation", 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#confirm[open]")))
	shot.take(ctx, "cancel-confirmation")
	confirm(t, ctx, "closes its 1 unpaid order (CREATED): their units and the buyers' quotas go back")
	waitText(t, ctx, "#live-state", "ENDED", 15*time.Second)
	waitText(t, ctx, "#live-orders-closed", "1", 15*time.Second)
	if !strings.Contains(text(t, ctx, "#message"), "1 unpaid orders closed") {
		t.Fatalf("after the cancel the console says %q", text(t, ctx, "#message"))
	}
	var sum struct {
		Orders map[string]int64 `json:"orders"`
	}
	if code, err := api.Do("GET", fmt.Sprintf("/admin/v1/activities/%d/summary", s.ActivityID), 1, auth.RoleAdmin, nil, nil, &sum); err != nil || code != 200 ||
		sum.Orders["CLOSED"] != 1 || sum.Orders["PAID"] != 1 || sum.Orders["CREATED"] != 0 {
		t.Fatalf("the summary after the cancel: %d %v %+v", code, err, sum)
	}
	waittest.Until(t, 15*time.Second, "the audit to list the cancel", func() bool { return strings.Contains(text(t, ctx, "#audit"), "sale.cancel") })

	// A sale for code holders with 3 codes of 2 uses: the console shows
	// the codes the API generated, once.
	run(t, ctx, "a sale with codes", 30*time.Second,
		chromedp.Click(chromedp.CSS(`nav a[href="#/new"]`)),
		chromedp.WaitVisible(chromedp.CSS("#create")),
		chromedp.SendKeys(chromedp.CSS("#sale-name"), "fan club tee"),
		chromedp.SetValue(chromedp.CSS("#sale-access"), "code_required"),
		chromedp.SetValue(chromedp.CSS("#sale-codes"), "3"),
		chromedp.SetValue(chromedp.CSS("#sale-code-uses"), "2"),
		chromedp.Click(chromedp.CSS("#create-sale")),
		chromedp.WaitVisible(chromedp.CSS("#codes-out")))
	shot.take(ctx, "codes")
	codes, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('codes-out').value`))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(codes, "\n")
	coded, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(text(t, ctx, "h1"), "Sale #"), " created"), 10, 64)
	if len(lines) != 3 || len(lines[0]) != len("XXXX-XXXX-XXXX-XXXX") || err != nil {
		t.Fatalf("the codes shown: %q (sale %d, %v)", codes, coded, err)
	}
	var cs struct {
		Codes int64 `json:"codes"`
		Uses  int64 `json:"uses"`
	}
	if code, err := api.Do("GET", fmt.Sprintf("/admin/v1/activities/%d/codes", coded), 1, auth.RoleAdmin, nil, nil, &cs); err != nil || code != 200 || cs.Codes != 3 || cs.Uses != 6 {
		t.Fatalf("the sale's codes: %d %v %+v, want 3 codes of 2 uses", code, err, cs)
	}
	watched.check(t)
}
