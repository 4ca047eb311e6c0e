package metrics_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/seckill/seckill/pkg/foundation/metrics"
)

const (
	alertsFile     = "../../../deploy/prometheus/alerts.yml"
	alertTestsFile = "../../../deploy/prometheus/alerts_test.yml"
	prometheusFile = "../../../deploy/prometheus/prometheus.yml"
	operationsFile = "../../../docs/operations.md"
	composeFile    = "../../../docker-compose.yml"
)

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// The alerts select only metrics that pkg/metrics registers, each has a
// severity, a summary and a runbook_url naming a section of
// docs/operations.md, and each is unit-tested in alerts_test.yml both
// firing and quiet. Prometheus loads the file, natively and in the compose
// stack. (promtool checks the syntax and runs the unit tests: make test.)
func TestAlerts(t *testing.T) {
	var rules struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &rules)
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name      string `yaml:"name"`
			AlertTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTestsFile, &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	if len(tests.RuleFiles) != 1 || tests.RuleFiles[0] != "alerts.yml" {
		t.Errorf("%s tests rule files %v, want [alerts.yml]", alertTestsFile, tests.RuleFiles)
	}

	reg := everything(t)
	metrics.NewPayments(reg).Notified(metrics.PaymentRefund) // not in everything: the dashboard has no payments panel
	known := seriesNames(t, reg)
	sections := headingAnchors(t, operationsFile)

	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			names := metricName.FindAllString(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q selects no metric of the programs", r.Alert, r.Expr)
			}
			for _, name := range names {
				if !known[name] {
					t.Errorf("%s: %q uses %s, which pkg/metrics does not register", r.Alert, r.Expr, name)
				}
			}
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("%s: severity %q, want page or ticket", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], "docs/operations.md#")
			if !ok || !sections[anchor] {
				t.Errorf("%s: runbook_url %q names no section of docs/operations.md", r.Alert, r.Annotations["runbook_url"])
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yml tests it firing %v, quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no alerts", alertsFile)
	}

	var prom struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, prometheusFile, &prom)
	if len(prom.RuleFiles) != 1 || prom.RuleFiles[0] != "alerts.yml" {
		t.Errorf("%s loads rule files %v, want [alerts.yml]", prometheusFile, prom.RuleFiles)
	}
	compose, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(compose), "./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro") {
		t.Errorf("%s does not put alerts.yml beside the compose Prometheus's prometheus.yml", composeFile)
	}
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// headingAnchors returns the anchors GitHub gives the Markdown headings of
// file: lower case, spaces to dashes, other punctuation dropped.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	anchors := map[string]bool{}
	code := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			code = !code
		}
		if code || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		h = drop.ReplaceAllString(strings.ToLower(h), "")
		anchors[strings.ReplaceAll(h, " ", "-")] = true
	}
	return anchors
}
