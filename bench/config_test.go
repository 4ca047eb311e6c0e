package main

import (
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/bench/internal/report"
)

func noEnv(string) (string, bool) { return "", false }

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		scenarios []string
		check     func(t *testing.T, o options)
		wantErr   bool
	}{
		{name: "defaults run everything", args: nil, scenarios: scenarioNames},
		{name: "a list", args: []string{"--scenario", "flash, compare"}, scenarios: []string{"flash", "compare"}},
		{name: "unknown scenario", args: []string{"--scenario", "soak"}, wantErr: true},
		{name: "--api needs the secret", args: []string{"--api", "http://127.0.0.1:8080"}, wantErr: true},
		{
			name: "--api with a secret", args: []string{"--api", "http://127.0.0.1:8080/", "--jwt-secret", secret},
			scenarios: scenarioNames,
			check: func(t *testing.T, o options) {
				if !reflect.DeepEqual(o.apiURLs, []string{"http://127.0.0.1:8080"}) || o.apis != 1 || o.redisPrefix != "sk" || o.startsPrograms() {
					t.Errorf("apis %q (%d) prefix %q", o.apiURLs, o.apis, o.redisPrefix)
				}
			},
		},
		{
			name: "reconcile with its orders", args: []string{"--scenario", "reconcile", "--orders", "50000"},
			scenarios: []string{"reconcile"},
			check: func(t *testing.T, o options) {
				if o.orders != 50000 {
					t.Errorf("orders = %d, want 50000", o.orders)
				}
			},
		},
		{name: "reconcile orders default to a million", args: []string{"--scenario", "reconcile"}, scenarios: []string{"reconcile"},
			check: func(t *testing.T, o options) {
				if o.orders != 1_000_000 {
					t.Errorf("orders = %d, want 1000000", o.orders)
				}
			}},
		{name: "no orders", args: []string{"--scenario", "reconcile", "--orders", "0"}, wantErr: true},
		{
			name: "sizes brings the one-item flash and sustained before it", args: []string{"--scenario", "sizes"},
			scenarios: []string{"flash", "sustained", "sizes"},
			check: func(t *testing.T, o options) {
				if o.sizesOf("sizes") != 12 || o.dropsOf("sizes") != 1 || o.skew != 1 {
					t.Errorf("sizes %d, drops %d, skew %g; want 12, 1, 1", o.sizesOf("sizes"), o.dropsOf("sizes"), o.skew)
				}
			},
		},
		{
			name: "drops: 20 drops of 10 sizes by default", args: []string{"--scenario", "drops"},
			scenarios: []string{"flash", "sustained", "drops"},
			check: func(t *testing.T, o options) {
				if o.sizesOf("drops") != 10 || o.dropsOf("drops") != 20 {
					t.Errorf("sizes %d, drops %d; want 10, 20", o.sizesOf("drops"), o.dropsOf("drops"))
				}
			},
		},
		{
			name: "a one-item load already asked for is not added again", args: []string{"--scenario", "idle,sustained,sizes,drops"},
			scenarios: []string{"idle", "sustained", "flash", "sizes", "drops"},
		},
		{
			name: "--sizes, --drops and --size-skew", args: []string{"--scenario", "flash,sustained,drops", "--sizes", "3", "--drops", "5", "--size-skew", "0"},
			scenarios: []string{"flash", "sustained", "drops"},
			check: func(t *testing.T, o options) {
				if o.sizesOf("drops") != 3 || o.sizesOf("sizes") != 3 || o.dropsOf("drops") != 5 || o.skew != 0 {
					t.Errorf("sizes %d, drops %d, skew %g; want 3, 5, 0", o.sizesOf("drops"), o.dropsOf("drops"), o.skew)
				}
			},
		},
		{
			name: "queue brings the sale page it is read against", args: []string{"--scenario", "queue", "--users", "5000"},
			scenarios: []string{"salepage", "queue"},
			check: func(t *testing.T, o options) {
				if sh := o.shapeOf("queue"); sh.users != 5000 || sh.stock != 1000 || sh.connections != 500 {
					t.Errorf("queue shape %+v; want 5000 users, stock 1000, 500 connections", sh)
				}
			},
		},
		{name: "a sale page asked for is not added again", args: []string{"--scenario", "queue,salepage"}, scenarios: []string{"queue", "salepage"}},
		{
			name: "draw brings the flash it is read against", args: []string{"--scenario", "draw"},
			scenarios: []string{"flash", "draw"},
			check: func(t *testing.T, o options) {
				if sh := o.shapeOf("draw"); sh.users != 100_000 || sh.stock != 1000 || sh.connections != 500 || o.sizesOf("draw") != 5 {
					t.Errorf("draw shape %+v, %d sizes; want 100000 users, stock 1000, 500 connections, 5 sizes", sh, o.sizesOf("draw"))
				}
			},
		},
		{name: "a flash asked for is not added again", args: []string{"--scenario", "draw,flash"}, scenarios: []string{"draw", "flash"}},
		{
			name: "events brings the sustained it is shown beside", args: []string{"--scenario", "events", "--duration", "10s"},
			scenarios: []string{"sustained", "events"},
			check: func(t *testing.T, o options) {
				if sh := o.shapeOf("events"); sh.connections != 200 || sh.stock != 1_000_000 || sh.duration != 10*time.Second {
					t.Errorf("events shape %+v; want 200 connections, stock 1000000, 10s", sh)
				}
				if o.eventsWait != 3*time.Minute {
					t.Errorf("events wait %s, want 3m", o.eventsWait)
				}
			},
		},
		{name: "a sustained asked for is not added again", args: []string{"--scenario", "events,sustained"}, scenarios: []string{"events", "sustained"}},
		{name: "events not in all", args: []string{"--scenario", "all"}, scenarios: scenarioNames},
		{name: "events restarts the programs: no --api", args: []string{"--scenario", "events", "--api", "http://127.0.0.1:8080", "--jwt-secret", strings.Repeat("k", 32)}, wantErr: true},
		{name: "events wait above 5m", args: []string{"--scenario", "events", "--events-wait", "6m"}, wantErr: true},
		{name: "events wait of 0", args: []string{"--scenario", "events", "--events-wait", "0s"}, wantErr: true},
		{name: "draw: less stock than sizes", args: []string{"--scenario", "draw", "--stock", "4"}, wantErr: true},
		{name: "sizes not in all", args: []string{"--scenario", "all"}, scenarios: scenarioNames},
		{name: "one size is no sale of sizes", args: []string{"--scenario", "sizes", "--sizes", "1"}, wantErr: true},
		{name: "too many sizes", args: []string{"--scenario", "sizes", "--sizes", "101"}, wantErr: true},
		{name: "no drops", args: []string{"--scenario", "drops", "--drops", "0"}, wantErr: true},
		{name: "negative skew", args: []string{"--scenario", "sizes", "--size-skew", "-1"}, wantErr: true},
		{name: "less stock than sizes", args: []string{"--scenario", "sizes", "--stock", "5"}, wantErr: true},
		{name: "bad program env", args: []string{"--program-env", "NOEQUALS"}, wantErr: true},
		{name: "bad client", args: []string{"--client", "curl"}, wantErr: true},
		{name: "stray argument", args: []string{"flash"}, wantErr: true},
		{name: "unknown topology", args: []string{"--topology", "mesh"}, wantErr: true},
		{name: "a topology names its own services", args: []string{"--topology", "replicated", "--kafka-brokers", "127.0.0.1:9092"}, wantErr: true},
		{
			name: "both topologies, plain first", args: []string{"--topology", "both", "--scenario", "flash,sustained", "--program-env", "SECKILL_KAFKA_MIN_INSYNC_REPLICAS=1"},
			scenarios: []string{"flash", "sustained"},
			check: func(t *testing.T, o options) {
				if len(o.topologies) != 2 || o.topologies[0].name != "cluster" || o.topologies[1].name != "replicated" {
					t.Fatalf("topologies %+v", o.topologies)
				}
				r := o.on(o.topologies[1])
				if !r.redisCluster || len(r.redisAddrs()) != 6 || len(r.brokers) != 3 || !strings.Contains(r.mysqlDSN, ":3307)") ||
					r.serviceName("kafka") != "kafka-cluster" || r.serviceName("redis") != "redis-replicas" {
					t.Errorf("replicated options: %+v", r)
				}
				// --program-env comes last, so it wins over the topology's.
				if got := r.programEnv[len(r.programEnv)-1]; got != "SECKILL_KAFKA_MIN_INSYNC_REPLICAS=1" {
					t.Errorf("program env %v", r.programEnv)
				}
				if o.serviceName("kafka") != "kafka" {
					t.Errorf("without a topology the kafka check is %q", o.serviceName("kafka"))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, noEnv, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !reflect.DeepEqual(o.scenarios, tt.scenarios) {
				t.Errorf("scenarios = %v, want %v", o.scenarios, tt.scenarios)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

const secret = "0123456789abcdef0123456789abcdef"

func TestParseFlagsAPIs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		apis    int
		urls    []string // nil: the bench starts the APIs
		wantErr string   // part of the error; "" for none
	}{
		{name: "one started API by default", apis: 1},
		{name: "two started APIs", args: []string{"--apis", "2"}, apis: 2},
		{name: "eight started APIs", args: []string{"--apis", "8"}, apis: 8},
		{name: "no APIs", args: []string{"--apis", "0"}, wantErr: "--apis must be from 1 to 8"},
		{name: "nine APIs", args: []string{"--apis", "9"}, wantErr: "--apis must be from 1 to 8"},
		{name: "fewer connections than APIs", args: []string{"--apis", "3", "--connections", "2"}, wantErr: "every API gets a connection"},
		{name: "as many connections as APIs", args: []string{"--apis", "3", "--connections", "3"}, apis: 3},
		{
			name: "a list of running APIs", args: []string{"--api", " http://127.0.0.1:8080/ ,http://127.0.0.1:8081", "--jwt-secret", secret},
			apis: 2, urls: []string{"http://127.0.0.1:8080", "http://127.0.0.1:8081"},
		},
		{
			name: "--apis agreeing with the list", args: []string{"--api", "http://a:1,http://b:2", "--apis", "2", "--jwt-secret", secret},
			apis: 2, urls: []string{"http://a:1", "http://b:2"},
		},
		{name: "--apis contradicting the list", args: []string{"--api", "http://a:1,http://b:2", "--apis", "3", "--jwt-secret", secret},
			wantErr: "with --api, list every running API"},
		{name: "an empty entry", args: []string{"--api", "http://a:1,,http://b:2", "--jwt-secret", secret}, wantErr: "an empty URL"},
		{name: "a trailing comma", args: []string{"--api", "http://a:1,", "--jwt-secret", secret}, wantErr: "an empty URL"},
		{name: "a URL twice", args: []string{"--api", "http://a:1,http://a:1/", "--jwt-secret", secret}, wantErr: "listed twice"},
		{name: "no scheme", args: []string{"--api", "127.0.0.1:8080", "--jwt-secret", secret}, wantErr: "--api"},
		{name: "not http", args: []string{"--api", "ftp://a:1", "--jwt-secret", secret}, wantErr: "want a base URL"},
		{name: "nine running APIs", args: []string{"--api", "http://a:1,http://a:2,http://a:3,http://a:4,http://a:5,http://a:6,http://a:7,http://a:8,http://a:9",
			"--jwt-secret", secret}, wantErr: "at most 8"},
		{name: "https needs net/http", args: []string{"--api", "https://a:1", "--jwt-secret", secret}, wantErr: "--client nethttp"},
		{name: "https with net/http", args: []string{"--api", "https://a:1", "--jwt-secret", secret, "--client", "nethttp"},
			apis: 1, urls: []string{"https://a:1"}},
		{name: "a list needs the secret", args: []string{"--api", "http://a:1,http://b:2"}, wantErr: "JWT secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, noEnv, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.apis != tt.apis || !reflect.DeepEqual(o.apiURLs, tt.urls) || o.startsPrograms() != (tt.urls == nil) {
				t.Errorf("apis = %d, urls = %q, starts programs %t; want %d, %q", o.apis, o.apiURLs, o.startsPrograms(), tt.apis, tt.urls)
			}
		})
	}
}

func TestShapeOf(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		scenario string
		want     shape
	}{
		{name: "flash defaults", scenario: "flash", want: shape{connections: 500, duration: 30 * time.Second, stock: 200}},
		{name: "flash-rate gets the fixed rate", scenario: "flash-rate", want: shape{connections: 500, duration: 30 * time.Second, stock: 200, rate: 5000}},
		{name: "--rate makes flash open", args: []string{"--rate", "800"}, scenario: "flash", want: shape{connections: 500, duration: 30 * time.Second, stock: 200, rate: 800}},
		{name: "--rate leaves compare closed", args: []string{"--rate", "800"}, scenario: "compare", want: shape{connections: 500, duration: 10 * time.Second, stock: 200, users: 1000}},
		{name: "overrides", args: []string{"--connections", "50", "--duration", "5s", "--stock", "7", "--users", "9"}, scenario: "sustained",
			want: shape{connections: 50, duration: 5 * time.Second, stock: 7}},
		{name: "sizes sells out as flash", scenario: "sizes", want: shape{connections: 500, duration: 30 * time.Second, stock: 200}},
		{name: "drops' lasting run is shaped as sustained", args: []string{"--duration", "10s", "--rate", "900"}, scenario: "drops-sustained",
			want: shape{connections: 200, duration: 10 * time.Second, stock: 1_000_000, rate: 900}},
		{name: "clickers has no duration", args: []string{"--duration", "5s", "--users", "9"}, scenario: "clickers",
			want: shape{connections: 500, stock: 100, users: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, noEnv, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := o.shapeOf(tt.scenario); got != tt.want {
				t.Fatalf("shape = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReplicationCostPairsRunsByScenario(t *testing.T) {
	runs := []*report.Run{
		{Name: "flash (cluster)", Topology: "cluster"}, {Name: "sustained (cluster)", Topology: "cluster"},
		{Name: "flash (replicated)", Topology: "replicated"}, {Name: "clickers"},
	}
	rows := replicationCost(runs)
	if len(rows) != 1 || rows[0].Scenario != "flash" || rows[0].Plain != runs[0] || rows[0].Replicated != runs[2] {
		t.Fatalf("rows %+v: want flash alone (sustained ran on one topology only)", rows)
	}
	if got := chartFile("flash (replicated)"); got != "flash-replicated.png" {
		t.Errorf("chart file %q", got)
	}
}

func TestTracingFlag(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	o, err := parseFlags([]string{"--tracing", "both"}, none, io.Discard)
	if err != nil || !slices.Equal(o.tracingModes, []string{"off", "on"}) || o.traceSample != 0.01 {
		t.Fatalf("--tracing both: %v %v %v", o.tracingModes, o.traceSample, err)
	}
	on := o.withTracing("on", "http://127.0.0.1:1", 0.01)
	if !slices.Contains(on.programEnv, "OTEL_TRACES_SAMPLER_ARG=0.01") || !slices.Contains(on.programEnv, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1") {
		t.Errorf("tracing on env %v", on.programEnv)
	}
	if off := o.withTracing("off", "", 0.01); !slices.Contains(off.programEnv, "OTEL_SDK_DISABLED=true") {
		t.Errorf("tracing off env %v", off.programEnv)
	}
	for _, bad := range [][]string{{"--tracing", "sometimes"}, {"--tracing", "on", "--trace-sample", "2"},
		{"--tracing", "on", "--api", "http://127.0.0.1:8080", "--jwt-secret", strings.Repeat("x", 32)}} {
		if _, err := parseFlags(bad, none, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	runs := []*report.Run{{Name: "flash"}, {Name: "flash"}, {Name: "sustained"}}
	tracingLabel(runs[0], "off", 0.01)
	tracingLabel(runs[1], "on", 0.01)
	tracingLabel(runs[2], "off", 0.01)
	rows := tracingCost(runs)
	if len(rows) != 1 || rows[0].Scenario != "flash" || rows[0].On.Name != "flash (tracing on, 1 % sampled)" || rows[0].Off.Name != "flash (tracing off)" {
		t.Fatalf("rows %+v", rows)
	}
}
