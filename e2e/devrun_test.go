package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
)

// devRun is one `make run` (scripts/dev-run) started by a test, in its own
// process group as a terminal would run it.
type devRun struct {
	addr    string
	cmd     *exec.Cmd
	done    chan error
	stderr  *bytes.Buffer
	printed string // what it printed up to and including its ready banner
}

// makeRunStart keeps two tests' `make run` from building bin/api and
// bin/consumer at the same moment: the second build could open a binary the
// first run is already executing.
var makeRunStart sync.Mutex

// startMakeRun runs `make run` on a free port with its own topic and keys
// (so it shares nothing with the other tests) and env on top, and returns
// once it printed its ready banner, whose last line holds "Ctrl-C stops".
func startMakeRun(t *testing.T, env ...string) *devRun {
	t.Helper()
	makeRunStart.Lock()
	defer makeRunStart.Unlock()
	d := &devRun{addr: pipelinetest.FreeAddr(t), done: make(chan error, 1), stderr: new(bytes.Buffer)}
	d.cmd = exec.Command("make", "--no-print-directory", "run")
	d.cmd.Dir = ".."
	d.cmd.Env = append(os.Environ(), "SECKILL_HTTP_ADDR="+d.addr, "SECKILL_ADMIN_ADDR=off",
		"SECKILL_KAFKA_TOPIC="+kafkatest.Name("devrun"), "SECKILL_REDIS_PREFIX="+kafkatest.Name("devrun"))
	d.cmd.Env = append(d.cmd.Env, env...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	})

	var printed strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Ctrl-C stops") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case err := <-d.done:
		t.Fatalf("make run ended before it was ready: %v\n%s\n%s", err, printed.String(), d.stderr.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run not ready after 3 minutes:\n%s\n%s", printed.String(), d.stderr.String())
	}
	d.printed = printed.String()
	return d
}

// interrupt sends Ctrl-C to the whole foreground group, as a terminal does,
// and checks that the api and the consumer stop.
func (d *devRun) interrupt(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("make run did not stop within 60s of Ctrl-C:\n%s", d.stderr.String())
	}
	if _, err := http.Get("http://" + d.addr + "/healthz"); err == nil {
		t.Fatal("the api still answers after Ctrl-C")
	}
}

// call sends a JSON body (nil: none) with a bearer token and returns the
// status and the decoded answer.
func (d *devRun) call(t *testing.T, method, path, token, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

// listen follows the banner's two webhook commands: it registers a
// listener (on a free port) and starts `bin/api webhook-listen` with the
// secret the answer shows. It returns the lines the listener prints, and
// what deletes the registration (make run's database outlives the test).
func (d *devRun) listen(t *testing.T, banner string) (*lines, func()) {
	t.Helper()
	reg := regexp.MustCompile(`POST (\S+)/admin/v1/webhooks -H 'Authorization: Bearer ([A-Za-z0-9._-]+)' \\\s+-d '(\{"url": "http://127.0.0.1:8099/"[^']*\})'`).FindStringSubmatch(banner)
	run := regexp.MustCompile(`SECKILL_WEBHOOK_SECRET=whsec_\.\.\. bin/api webhook-listen --port 8099`).FindString(banner)
	if reg == nil || run == "" {
		t.Fatalf("no webhook commands in the banner:\n%s", banner)
	}
	port := strings.TrimPrefix(pipelinetest.FreeAddr(t), "127.0.0.1:")
	status, v := d.call(t, "POST", "/admin/v1/webhooks", reg[2], strings.Replace(reg[3], "8099", port, 1))
	secret, _ := v["secret"].(string)
	if status != http.StatusCreated || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the printed webhook registration: %d %v", status, v)
	}
	cmd := exec.Command("../bin/api", "webhook-listen", "--port", port)
	cmd.Env = append(os.Environ(), "SECKILL_WEBHOOK_SECRET="+secret)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	l := &lines{}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.add(sc.Text())
		}
	}()
	return l, func() {
		if status, _ := d.call(t, "DELETE", fmt.Sprintf("/admin/v1/webhooks/%v", v["webhook_id"]), reg[2], ""); status != http.StatusNoContent {
			t.Errorf("delete the listener's registration: %d", status)
		}
	}
}

// lines is what a program printed, a line at a time.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

// waitFor waits until a line printed satisfies ok.
func waitFor(t *testing.T, l *lines, within time.Duration, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		all := append([]string(nil), l.all...)
		l.mu.Unlock()
		for _, s := range all {
			if ok(s) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, within)
}

// The README's first command, `make run` (scripts/dev-run), brings up the
// pipeline with a demo sale and prints an order command that works, and
// the commands that make a listener print the order's events; Ctrl-C
// stops the api and the consumer cleanly.
func TestMakeRun(t *testing.T) {
	t.Parallel()
	d := startMakeRun(t)
	addr := d.addr

	// The api it runs is alive and reports every dependency reachable.
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, dep := range []string{`"redis":"ok"`, `"mysql":"ok"`, `"kafka":"ok"`} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(rb), dep) {
			t.Fatalf("readyz: %d %s, want 200 with %s", resp.StatusCode, rb, dep)
		}
	}

	// Register a listener for the shop's events as the banner says (on a
	// free port rather than its 8099) and start it with the answer's secret.
	text := d.printed
	events, unregister := d.listen(t, text)

	// Place the order exactly as the banner says.
	tok := regexp.MustCompile(`Authorization: Bearer ([A-Za-z0-9._-]+)`).FindStringSubmatch(text)
	body := regexp.MustCompile(`-d '(\{"activity_id": \d+, "quantity": 1\})'`).FindStringSubmatch(text)
	if tok == nil || body == nil {
		t.Fatalf("no order command in the banner:\n%s", text)
	}
	status, v := d.call(t, "POST", "/api/v1/orders", tok[1], body[1],
		"Idempotency-Key", fmt.Sprintf("devrun-%d", time.Now().UnixNano()))
	if status != http.StatusAccepted || v["order_no"] == nil {
		t.Fatalf("the printed order command: %d %v", status, v)
	}
	// The listener prints the order's order.created.
	created := `"type":"order.created"`
	waitFor(t, events, 60*time.Second, fmt.Sprintf("the listener prints order %v's order.created", v["order_no"]), func(line string) bool {
		return strings.Contains(line, created) && strings.Contains(line, fmt.Sprintf(`"order_no":"%v"`, v["order_no"]))
	})

	// The sale in sizes: six sizes on its page, one bought as the banner
	// says, the order naming its size.
	sized := regexp.MustCompile(`-d '(\{"activity_id": (\d+), "item_id": \d+, "quantity": 1\})'`).FindStringSubmatch(text)
	if sized == nil {
		t.Fatalf("no order command for the sale in sizes in the banner:\n%s", text)
	}
	status, page := d.call(t, "GET", "/api/v1/activities/"+sized[2], "", "")
	if items, _ := page["items"].([]any); status != http.StatusOK || len(items) != 6 || page["state"] != "LIVE" {
		t.Fatalf("the sale page of the demo in sizes: %d %v", status, page)
	}
	status, v = d.call(t, "POST", "/api/v1/orders", tok[1], sized[1], "Idempotency-Key", fmt.Sprintf("devrun-size-%d", time.Now().UnixNano()))
	if status != http.StatusAccepted || v["order_no"] == nil {
		t.Fatalf("the printed order command for a size: %d %v", status, v)
	}
	status, o := d.call(t, "GET", fmt.Sprintf("/api/v1/orders/%v", v["order_no"]), tok[1], "")
	if status != http.StatusOK || o["label"] != "EU 42" {
		t.Fatalf("the order of a size: %d %v, want the label EU 42", status, o)
	}

	// The drop with a waiting room: its waiting page's address, signed in
	// as a buyer, serves the page; the sale says it has a room.
	room := regexp.MustCompile(`(http://\S+)/sale/(\d+)#token=(\S+)`).FindStringSubmatch(text)
	if room == nil {
		t.Fatalf("no waiting page address in the banner:\n%s", text)
	}
	pageResp, err := http.Get(room[1] + "/sale/" + room[2])
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(pageResp.Body)
	pageResp.Body.Close()
	if pageResp.StatusCode != http.StatusOK || !strings.Contains(string(html), "/static/sale.js") {
		t.Fatalf("the waiting page: %d %.200s", pageResp.StatusCode, html)
	}
	if status, page := d.call(t, "GET", "/api/v1/activities/"+room[2], "", ""); status != http.StatusOK || page["waiting_room"] != true {
		t.Fatalf("the sale page of the drop with a room: %d %v", status, page)
	}
	if status, q := d.call(t, "GET", "/api/v1/activities/"+room[2]+"/queue", room[3], ""); status != http.StatusNotFound {
		t.Fatalf("the buyer of the address polls before joining: %d %v, want 404", status, q)
	}
	// The operator console: its address carries the operator's token,
	// which opens the admin API's list of sales (the demo's three).
	console := regexp.MustCompile(`(http://\S+)/console#token=(\S+)`).FindStringSubmatch(text)
	if console == nil {
		t.Fatalf("no console address in the banner:\n%s", text)
	}
	if resp, err := http.Get(console[1] + "/console"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the console's page: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if status, l := d.call(t, "GET", "/admin/v1/activities", console[2], ""); status != http.StatusOK || len(l["activities"].([]any)) < 3 {
		t.Fatalf("the console's token lists the sales: %d %v, want the demo's three", status, l)
	}
	unregister()

	d.interrupt(t)
}

// `make run` with the shop's identity provider configured (a JWKS the test
// serves, set up as for Keycloak) starts: it sets no development secret,
// which the api would refuse beside a JWK Set URL, mints no token and makes
// no demo sale, and says where to get a token. Tokens the provider signs
// then open a sale and place an order; a development token is refused.
func TestMakeRunWithIdentityProvider(t *testing.T) {
	t.Parallel()
	provider := newIDP(t)
	d := startMakeRun(t, provider.env()...)

	for _, want := range []string{
		"no development secret, no tokens minted",
		"keys      " + provider.srv.URL + "/realms/shop/protocol/openid-connect/certs",
		"issuer    " + provider.issuer,
		"audience  seckill-api",
		"operators hold seckill-admin in the claim realm_access.roles",
		provider.srv.URL + "/realms/shop/protocol/openid-connect/token", // beside the realm's certs
		"/console: set SECKILL_CONSOLE_CLIENT_ID (seckill-console in make keycloak's realm)",
	} {
		if !strings.Contains(d.printed, want) {
			t.Fatalf("the banner lacks %q:\n%s", want, d.printed)
		}
	}
	if strings.Contains(d.printed, "Bearer ey") || strings.Contains(d.printed, "Demo item") {
		t.Fatalf("dev-run minted a token or made a demo sale with a provider configured:\n%s", d.printed)
	}

	admin := provider.mint("operator-1", auth.RoleAdmin)
	status, item := d.call(t, "POST", "/admin/v1/items", admin, `{"name":"sneaker","stock":5}`)
	if status != http.StatusCreated {
		t.Fatalf("create item as the provider's operator: %d %v", status, item)
	}
	start, end := time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	status, sale := d.call(t, "POST", "/admin/v1/activities", admin,
		fmt.Sprintf(`{"item_id":%v,"starts_at":%q,"ends_at":%q}`, item["item_id"], start, end))
	if status != http.StatusCreated {
		t.Fatalf("create sale: %d %v", status, sale)
	}
	if status, v := d.call(t, "POST", fmt.Sprintf("/admin/v1/activities/%v/warmup", sale["activity_id"]), admin, ""); status != http.StatusOK {
		t.Fatalf("warm up: %d %v", status, v)
	}
	order := fmt.Sprintf(`{"activity_id":%v,"quantity":1}`, sale["activity_id"])
	status, placed := d.call(t, "POST", "/api/v1/orders", provider.mint("buyer-7f3c", ""), order, "Idempotency-Key", "devrun-idp-1")
	if status != http.StatusAccepted || placed["order_no"] == nil {
		t.Fatalf("order as the provider's buyer: %d %v", status, placed)
	}
	// No development secret is in use: a token signed with dev-run's buys nothing.
	dev, err := auth.Mint([]byte("dev-only-secret-change-me-0123456789abcdef"), "buyer-7f3c", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if status, v := d.call(t, "POST", "/api/v1/orders", dev, order, "Idempotency-Key", "devrun-idp-2"); status != http.StatusUnauthorized {
		t.Fatalf("a development token with a provider configured: %d %v, want 401", status, v)
	}

	d.interrupt(t)
}
