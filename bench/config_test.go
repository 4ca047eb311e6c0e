package main

import (
	"io"
	"reflect"
	"testing"
	"time"
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
			name: "--api with a secret", args: []string{"--api", "http://127.0.0.1:8080/", "--jwt-secret", "0123456789abcdef0123456789abcdef"},
			scenarios: scenarioNames,
			check: func(t *testing.T, o options) {
				if o.api != "http://127.0.0.1:8080" || o.redisPrefix != "sk" {
					t.Errorf("api %q prefix %q", o.api, o.redisPrefix)
				}
			},
		},
		{name: "bad program env", args: []string{"--program-env", "NOEQUALS"}, wantErr: true},
		{name: "bad client", args: []string{"--client", "curl"}, wantErr: true},
		{name: "stray argument", args: []string{"flash"}, wantErr: true},
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
