package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

const (
	dashboardFile  = "../../../deploy/grafana/dashboards/seckill.json"
	datasourceFile = "../../../deploy/grafana/provisioning/datasources/prometheus.yml"
)

type dashboardPanel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Datasource *struct{ UID string }     `json:"datasource"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		Expr       string                `json:"expr"`
		Datasource *struct{ UID string } `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// metricName finds the names an expression selects: words that start like
// the programs' metrics.
var metricName = regexp.MustCompile(`\b(?:seckill|go|process)_[a-zA-Z0-9_]+\b`)

// The dashboard parses, has panels, and every panel's queries select
// metrics that pkg/metrics registers; every seckill_ metric is on it.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string           `json:"uid"`
		Title  string           `json:"title"`
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard uid %q title %q with %d panels", d.UID, d.Title, len(d.Panels))
	}
	ds, err := os.ReadFile(datasourceFile)
	if err != nil {
		t.Fatal(err)
	}

	known := seriesNames(t, everything(t))
	used := map[string]bool{}
	ids := map[int]bool{}
	var walk func([]dashboardPanel)
	graphs := 0
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("panel %q: id %d missing or used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
				t.Errorf("panel %d: no title or no size", p.ID)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			graphs++
			if p.Datasource == nil || !strings.Contains(string(ds), "uid: "+p.Datasource.UID) {
				t.Errorf("panel %q: its datasource is not the provisioned one", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no queries", p.Title)
			}
			for _, tg := range p.Targets {
				names := metricName.FindAllString(tg.Expr, -1)
				if len(names) == 0 {
					t.Errorf("panel %q: query %q selects no metric of the programs", p.Title, tg.Expr)
				}
				for _, n := range names {
					used[n] = true
					if !known[n] {
						t.Errorf("panel %q: query %q uses %s, which pkg/metrics does not register", p.Title, tg.Expr, n)
					}
				}
			}
		}
	}
	walk(d.Panels)
	if graphs == 0 {
		t.Fatal("the dashboard has only rows")
	}
	for n := range known {
		if !strings.HasPrefix(n, "seckill_") {
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !used[n] && !used[base] && !used[base+"_bucket"] && !used[base+"_sum"] && !used[base+"_count"] {
			t.Errorf("%s is on no panel", base)
		}
	}
}
