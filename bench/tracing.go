package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seckill/seckill/bench/internal/report"
	"github.com/seckill/seckill/internal/testkit/otlptest"
)

// parseTracing turns --tracing into the modes to run in turn: none (the
// programs' environment decides), off, on, or both (off, then on, side by
// side).
func parseTracing(v string) ([]string, error) {
	switch v {
	case "":
		return nil, nil
	case "off", "on":
		return []string{v}, nil
	case "both":
		return []string{"off", "on"}, nil
	}
	return nil, fmt.Errorf("--tracing %q: want off, on or both", v)
}

// withTracing is c with the started programs' tracing off (OTEL_SDK_DISABLED)
// or on: OTLP/HTTP to endpoint (the bench's own sink), sampled at ratio,
// parent-based as in production (a traced caller's decision wins).
func (c options) withTracing(mode, endpoint string, ratio float64) options {
	c.tracing = mode
	env := []string{"OTEL_SDK_DISABLED=true"}
	if mode == "on" {
		env = []string{"OTEL_SDK_DISABLED=false", "OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_SAMPLER=parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG=" + strconv.FormatFloat(ratio, 'g', -1, 64)}
	}
	c.programEnv = append(env, c.programEnv...)
	return c
}

// tracingLabel names a run after its tracing mode, when the run has one.
func tracingLabel(r *report.Run, mode string, ratio float64) {
	if mode == "" {
		return
	}
	r.Tracing = mode
	if mode == "on" {
		r.Tracing = fmt.Sprintf("on, %s sampled", percent(ratio))
	}
	r.Name += " (tracing " + r.Tracing + ")"
}

func percent(ratio float64) string {
	return strconv.FormatFloat(ratio*100, 'g', -1, 64) + " %"
}

// tracingCost pairs each scenario's runs with tracing off and on.
func tracingCost(runs []*report.Run) []*report.TracingRow {
	byScenario := map[string][2]*report.Run{}
	var order []string
	for _, r := range runs {
		if r.Tracing == "" {
			continue
		}
		scen := r.Name[:strings.LastIndex(r.Name, " (tracing ")]
		pair, seen := byScenario[scen]
		if !seen {
			order = append(order, scen)
		}
		if r.Tracing == "off" {
			pair[0] = r
		} else {
			pair[1] = r
		}
		byScenario[scen] = pair
	}
	var rows []*report.TracingRow
	for _, scen := range order {
		p := byScenario[scen]
		if p[0] != nil && p[1] != nil {
			rows = append(rows, &report.TracingRow{Scenario: scen, Off: p[0], On: p[1], OffRun: p[0].Name, OnRun: p[1].Name})
		}
	}
	return rows
}

// startSink starts the OTLP/HTTP sink the traced programs export to: it
// decodes every export and counts the spans, as a collector would take
// them, and keeps nothing.
func startSink(modes []string) (*otlptest.Receiver, error) {
	for _, m := range modes {
		if m == "on" {
			return otlptest.Start(false)
		}
	}
	return nil, nil
}

// sinkURL is the sink's base URL ("" without one).
func sinkURL(r *otlptest.Receiver) string {
	if r == nil {
		return ""
	}
	return r.URL
}
