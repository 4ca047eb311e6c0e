//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
)

// ruleTimeScale divides every duration of the shipped rules (for: and range
// selectors) in the test's copy, so a 5-minute window is 10 s.
const ruleTimeScale = 30

// Debian's Prometheus scrapes the real api and consumer with the shipped
// deploy/prometheus/prometheus.yml and alerts.yml (its copy rewrites only
// the targets, 1 s scrape and evaluation intervals, and the rules' durations
// divided by ruleTimeScale): during a healthy sale no alert is pending or
// firing; with Kafka stopped, SeckillPublishFailing fires in Prometheus's
// own /api/v1/alerts; once Kafka is back it resolves, and every order
// accepted on the way is final with the stores agreeing.
func TestChaosPrometheusAlertsOnKafkaDown(t *testing.T) {
	fault(t)
	began := time.Now()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI("SECKILL_KAFKA_WRITE_TIMEOUT=1s")
	admin := pipelinetest.FreeAddr(t)
	p.StartConsumer("SECKILL_ADMIN_ADDR=" + admin)
	prom := startPrometheus(t, map[string]string{"api": strings.TrimPrefix(api.URL, "http://"), "consumer": admin})
	waittest.Until(t, 30*time.Second, "Prometheus to scrape the api and the consumer", func() bool {
		return prom.query(t, `sum(up{job=~"api|consumer"})`) == 2
	})
	t.Logf("pipeline up, Prometheus scraping it: %v into the test", time.Since(began).Round(time.Millisecond))

	// A healthy sale, longer than the longest scaled for: (10 s): nothing
	// may even be pending.
	sale := api.CreateSale(1000, 1)
	healthy := startLoad(api, sale, users(1, 120), 12*time.Second, 10)
	for done := false; !done; {
		select {
		case <-healthy.done:
			done = true
		case <-time.After(500 * time.Millisecond):
		}
		if a := prom.alerts(t); len(a) > 0 {
			t.Fatalf("alerts during a healthy sale: %v", a)
		}
	}
	if len(healthy.accepted) != 120 {
		t.Fatalf("healthy sale: %d of 120 accepted; %v", len(healthy.accepted), healthy.codes)
	}
	// Prometheus saw the sale, so its quiet meant something.
	waittest.Until(t, 10*time.Second, "Prometheus to see the sale's publishes", func() bool {
		return prom.query(t, `sum(seckill_publish_total{result="ok"})`) >= 120 &&
			prom.query(t, `sum(seckill_consumer_events_total{outcome="created"})`) >= 120
	})
	if a := prom.alerts(t); len(a) > 0 {
		t.Fatalf("alerts after a healthy sale: %v", a)
	}
	t.Logf("healthy sale: 120 orders, no alert pending or firing (%v into the test)", time.Since(began).Round(time.Millisecond))

	// Kafka stops while buyers keep coming.
	buyers := startSteadyLoad(api, sale.ActivityID, 1001, 100*time.Millisecond, 10)
	kafkaDown := true
	t.Cleanup(func() {
		if kafkaDown {
			services(t, "start", "kafka")
		}
	})
	stopped := time.Now()
	services(t, "stop", "kafka")
	t.Logf("kafka stopped in %v", time.Since(stopped).Round(time.Millisecond))
	waittest.UntilEvery(t, 30*time.Second, 250*time.Millisecond, "SeckillPublishFailing firing", func() bool {
		return prom.alerts(t)["SeckillPublishFailing"] == "firing"
	})
	t.Logf("SeckillPublishFailing firing %v after the stop began; active: %v", time.Since(stopped).Round(time.Millisecond), prom.alerts(t))

	started := time.Now()
	services(t, "start", "kafka")
	kafkaDown = false
	t.Logf("kafka started in %v", time.Since(started).Round(time.Millisecond))
	waittest.UntilEvery(t, 60*time.Second, 250*time.Millisecond, "SeckillPublishFailing resolved", func() bool {
		_, active := prom.alerts(t)["SeckillPublishFailing"]
		return !active
	})
	t.Logf("SeckillPublishFailing resolved %v after Kafka was started; active: %v", time.Since(started).Round(time.Millisecond), prom.alerts(t))
	buyers.stop()

	unavailable := refusedHoldNothing(t, p, sale, buyers.load)
	if unavailable == 0 {
		t.Fatalf("no 503 while Kafka was down: %v", buyers.codes)
	}
	all := map[string]int64{}
	for _, l := range []*load{healthy, buyers.load} {
		for no, u := range l.accepted {
			all[no] = u
		}
	}
	inv := settle(t, p, sale, all, 60*time.Second)
	if inv.LiveOrders != int64(len(all)) {
		t.Fatalf("accepted %d, live %d", len(all), inv.LiveOrders)
	}
	t.Logf("%d accepted, %d answered 503, all final; %v in all", len(all), unavailable, time.Since(began).Round(time.Millisecond))
}

// steadyLoad places one order every gap, each by a new user, at most
// concurrency at a time, until stop.
type steadyLoad struct {
	*load
	quit chan struct{}
}

func startSteadyLoad(api *pipelinetest.API, activity, firstUser int64, gap time.Duration, concurrency int) *steadyLoad {
	s := &steadyLoad{
		load: &load{accepted: map[string]int64{}, byUser: map[int64]int{}, codes: map[string]int{}, done: make(chan struct{})},
		quit: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, concurrency)
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for u := firstUser; ; u++ {
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
			select {
			case <-s.quit:
				return
			case sem <- struct{}{}:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				p, err := api.PlaceOrder(u, fmt.Sprintf("k%d", u), activity, 1)
				s.mu.Lock()
				defer s.mu.Unlock()
				if err != nil {
					s.neterrs++
					return
				}
				s.byUser[u] = p.Code
				if p.Code == 202 {
					s.accepted[p.OrderNo] = u
				} else {
					s.codes[fmt.Sprintf("%d %s", p.Code, p.Error)]++
				}
			}()
		}
	}()
	return s
}

// stop ends the load and waits for the orders in flight.
func (s *steadyLoad) stop() { close(s.quit); <-s.done }

// prometheus is a running Prometheus server.
type prometheus struct {
	url    string
	client *http.Client
}

// startPrometheus runs Debian's prometheus (installed by `scripts/services
// tool prometheus`) on a free loopback port with a copy of the shipped
// configuration and rules in a temporary folder: the scrape jobs named in
// targets scrape those addresses, the others (the reconciler's) are left
// out, intervals are 1 s and the rules' durations are divided by
// ruleTimeScale. It is killed when the test ends.
func startPrometheus(t *testing.T, targets map[string]string) *prometheus {
	t.Helper()
	root := repoRoot(t)
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		install := exec.Command(filepath.Join(root, "scripts", "services"), "tool", "prometheus")
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("scripts/services tool prometheus: %v\n%s", err, out)
		}
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	addr := pipelinetest.FreeAddr(t)

	var conf map[string]any
	b, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &conf); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	global, _ := conf["global"].(map[string]any)
	if global == nil {
		t.Fatal("prometheus.yml has no global section")
	}
	global["scrape_interval"], global["evaluation_interval"] = "1s", "1s"
	targets = map[string]string{"prometheus": addr, "api": targets["api"], "consumer": targets["consumer"]}
	var jobs []any
	for _, j := range conf["scrape_configs"].([]any) {
		job := j.(map[string]any)
		name, _ := job["job_name"].(string)
		to, ok := targets[name]
		if !ok {
			continue
		}
		delete(targets, name)
		delete(job, "dns_sd_configs")
		job["static_configs"] = []any{map[string]any{"targets": []any{to}}}
		jobs = append(jobs, job)
	}
	if len(targets) > 0 {
		t.Fatalf("prometheus.yml has no scrape job for %v", targets)
	}
	conf["scrape_configs"] = jobs
	if b, err = yaml.Marshal(conf); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "prometheus.yml"), b)

	rules, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "alerts.yml"), scaleRuleDurations(t, rules, ruleTimeScale))

	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // read only after Wait
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("--- prometheus log (last 4 KiB):\n%s", tail(out.String(), 4096))
		}
	})
	pr := &prometheus{url: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}}
	waittest.Until(t, 30*time.Second, "prometheus ready at "+pr.url, func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %s", tail(out.String(), 2048))
		default:
		}
		resp, err := pr.client.Get(pr.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// Both rule files made it: the rules API lists every alert of the copy.
	var rulesAnswer struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name     string  `json:"name"`
					Duration float64 `json:"duration"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	pr.get(t, "/api/v1/rules", &rulesAnswer)
	n := 0
	for _, g := range rulesAnswer.Data.Groups {
		n += len(g.Rules)
	}
	if want := strings.Count(string(rules), "- alert: "); n != want || n == 0 {
		t.Fatalf("prometheus loaded %d rules, alerts.yml has %d", n, want)
	}
	return pr
}

// durationRE finds the durations of a rules file: for: values and range
// selectors.
var durationRE = regexp.MustCompile(`(for: *|\[)(\d+)([smh])\b`)

// scaleRuleDurations divides every for: and range duration of rules by
// scale (at least 1 s).
func scaleRuleDurations(t *testing.T, rules []byte, scale int) []byte {
	t.Helper()
	n := 0
	out := durationRE.ReplaceAllFunc(rules, func(m []byte) []byte {
		g := durationRE.FindSubmatch(m)
		v, _ := strconv.Atoi(string(g[2]))
		d, _ := time.ParseDuration(fmt.Sprintf("%d%s", v, g[3]))
		n++
		return fmt.Appendf(nil, "%s%ds", g[1], max(int(d.Seconds())/scale, 1))
	})
	if n == 0 {
		t.Fatal("alerts.yml: no durations to scale")
	}
	return out
}

func (pr *prometheus) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := pr.client.Get(pr.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// alerts returns the active alerts from /api/v1/alerts: name -> state
// (pending or firing). A resolved alert is not listed.
func (pr *prometheus) alerts(t *testing.T) map[string]string {
	t.Helper()
	var a struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	pr.get(t, "/api/v1/alerts", &a)
	out := map[string]string{}
	for _, al := range a.Data.Alerts {
		if out[al.Labels["alertname"]] != "firing" {
			out[al.Labels["alertname"]] = al.State
		}
	}
	return out
}

// query evaluates an instant query whose answer is one number (or nothing:
// -1).
func (pr *prometheus) query(t *testing.T, q string) float64 {
	t.Helper()
	var a struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	pr.get(t, "/api/v1/query?query="+url.QueryEscape(q), &a)
	if len(a.Data.Result) == 0 {
		return -1
	}
	s, _ := a.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %v", q, a.Data.Result[0].Value[1])
	}
	return v
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
