package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/pkg/service/placing"
)

// The console's page and files come with a policy that runs only this
// origin's scripts and lets them talk to this origin and the identity
// provider's, nothing inline; its settings name the provider and the
// role claim; nothing outside its files is served under /console.
func TestConsoleServedWithItsPolicy(t *testing.T) {
	t.Parallel()
	cfg := httpapi.Console{Issuer: "https://id.example.com/realms/shop", ClientID: "seckill-console",
		RoleClaim: "realm_access.roles", AdminRole: "seckill-admin"}
	srv := httptest.NewServer(httpapi.New(&placing.Service{}, httpapi.Services{}, nil, nil, slog.New(slog.DiscardHandler),
		httpapi.WithConsole(cfg)))
	t.Cleanup(srv.Close)
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct{ path, ctype, has string }{
		{"/console", "text/html", `<script type="module" src="/console/console.js">`},
		{"/console/console.js", "text/javascript", "import * as auth from './auth.js';"},
		{"/console/auth.js", "text/javascript", "code_challenge_method: 'S256'"},
		{"/console/console.css", "text/css", "body {"},
	} {
		resp, body := get(tc.path)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) || !strings.Contains(body, tc.has) {
			t.Fatalf("%s: %d %s, want %s holding %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.ctype, tc.has)
		}
		if !strings.Contains(csp, "connect-src 'self' https://id.example.com;") || !strings.Contains(csp, "default-src 'self'") ||
			strings.Contains(csp, "unsafe") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: policy %q, nosniff %q", tc.path, csp, resp.Header.Get("X-Content-Type-Options"))
		}
	}
	resp, body := get("/console/config.json")
	var got httpapi.Console
	if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 || got != cfg {
		t.Fatalf("config.json: %d %s %v, want %+v", resp.StatusCode, body, err, cfg)
	}
	for _, path := range []string{"/console/console.html", "/console/nope.js", "/console/.hidden.js", "/console/sale.css", "/console/%2e%2e%2fsale.js"} {
		if resp, _ := get(path); resp.StatusCode != 404 {
			t.Fatalf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// The sales listed newest first, a page at a time, each with its state
// and units left: MySQL's stock before the warm-up, Redis's after it
// (less a reserved unit); a sale whose rows are no longer whole is left
// out, and the pages go on past it.
func TestSaleListPages(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	_, open := ts.openSale(t, 5, 1)
	ts.mustPlace(t, ts.url, buyerToken(t, 7), "list-1", open)
	upcoming := ts.newActivity(t, ts.newItem(t, 3), time.Now().Add(time.Hour), time.Now().Add(2*time.Hour), 1)
	_, sized := ts.openSizedSale(t, 2, 2)

	type entry struct {
		ActivityID int64  `json:"activity_id"`
		State      string `json:"state"`
		UnitsLeft  int64  `json:"units_left"`
		Mode       string `json:"mode"`
		Items      []struct {
			Label string `json:"label"`
		} `json:"items"`
	}
	page := func(query string) (out []entry, next *int64) {
		r := ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/activities" + query, token: adminToken(t)})
		if r.status != http.StatusOK {
			t.Fatalf("list %s: %d %s", query, r.status, r.body)
		}
		var v struct {
			Activities []entry `json:"activities"`
			NextBefore *int64  `json:"next_before"`
		}
		if err := json.Unmarshal(r.body, &v); err != nil { // the fields the test reads
			t.Fatal(err)
		}
		return v.Activities, v.NextBefore
	}
	// A sale whose item's stock row is gone (removed around the API) is
	// left out of its page, and the paging goes on past it.
	broken := ts.newItem(t, 1)
	ts.newActivity(t, broken, time.Now().Add(3*time.Hour), time.Now().Add(4*time.Hour), 1)
	if err := ts.db.Gorm().Exec("DELETE FROM item_stock WHERE item_id = ?", broken).Error; err != nil {
		t.Fatal(err)
	}

	first, next := page("?limit=2")
	if len(first) != 1 || next == nil || *next != sized {
		t.Fatalf("first page: %+v next %v, want the sale in sizes alone (the newer one unreadable) and next_before %d", first, next, sized)
	}
	if e := first[0]; e.ActivityID != sized || e.State != "LIVE" || e.UnitsLeft != 4 || len(e.Items) != 2 || e.Items[1].Label != "size 2" {
		t.Fatalf("the sale in sizes: %+v, want %d LIVE with 4 units in 2 sizes", e, sized)
	}
	second, next := page(fmt.Sprintf("?limit=2&before=%d", *next))
	if len(second) != 2 || next == nil || *next != open {
		t.Fatalf("second page: %+v next %v, want 2 sales and next_before %d", second, next, open)
	}
	if e := second[0]; e.ActivityID != upcoming || e.State != "UPCOMING" || e.UnitsLeft != 3 || e.Mode != "first_come" {
		t.Fatalf("the sale before it: %+v, want %d UPCOMING with its 3 units in MySQL", e, upcoming)
	}
	if e := second[1]; e.ActivityID != open || e.State != "LIVE" || e.UnitsLeft != 4 {
		t.Fatalf("the oldest sale: %+v, want %d LIVE with 4 of 5 units left", e, open)
	}
	if last, next := page(fmt.Sprintf("?before=%d", open)); len(last) != 0 || next != nil {
		t.Fatalf("past the oldest: %+v next %v, want nothing", last, next)
	}
	r := ts.do(t, ts.url, request{method: "GET", path: "/admin/v1/activities?limit=0", token: adminToken(t)})
	wantError(t, r, http.StatusBadRequest, "INVALID_ARGUMENT")
}

// The spec's list of the console's files is the folder's: a module added
// without it would be served but undescribed, one removed described but
// gone. Every one is served with its type.
func TestConsoleFilesInTheSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, p := range doc.Paths.Find("/console/{file}").Parameters {
		for _, v := range p.Value.Schema.Value.Enum {
			listed = append(listed, v.(string))
		}
	}
	entries, err := os.ReadDir("web/console")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"config.json"}
	for _, e := range entries {
		if e.Name() != "console.html" {
			files = append(files, e.Name())
		}
	}
	sort.Strings(listed)
	sort.Strings(files)
	if !equal(listed, files) {
		t.Fatalf("the spec lists %v, the folder holds %v (and config.json)", listed, files)
	}
	srv := httptest.NewServer(httpapi.New(&placing.Service{}, httpapi.Services{}, nil, nil, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	for _, f := range files {
		resp, err := http.Get(srv.URL + "/console/" + f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := map[string]string{".js": "text/javascript", ".css": "text/css", ".json": "application/json"}[path.Ext(f)]
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) {
			t.Fatalf("/console/%s: %d %s, want 200 %s", f, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
}
