package cpu

import (
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		busy, total time.Duration
		wantErr     bool
	}{
		{
			name: "user nice system idle iowait irq softirq steal guest guest_nice",
			in:   "cpu  100 20 30 400 50 6 4 10 99 99\ncpu0 1 2 3 4 5 6 7 8 9 10\n",
			busy: 1700 * time.Millisecond, total: 6200 * time.Millisecond,
		},
		{name: "old kernel with four fields", in: "cpu 100 0 100 800\n", busy: 2 * time.Second, total: 10 * time.Second},
		{name: "not the aggregate line", in: "cpu0 1 2 3 4 5\n", wantErr: true},
		{name: "garbage", in: "cpu a b c d\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy, total, err := ParseStat([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			if busy != tt.busy || total != tt.total {
				t.Fatalf("busy %v total %v, want %v %v", busy, total, tt.busy, tt.total)
			}
		})
	}
}

func TestParseProcStat(t *testing.T) {
	fields := func(comm string) string {
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
		return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1234 0 0"
	}
	tests := []struct {
		name    string
		in      string
		want    time.Duration
		wantErr bool
	}{
		{name: "plain name", in: fields("api"), want: 3 * time.Second},
		{name: "name with spaces and parentheses", in: fields("my (odd) prog"), want: 3 * time.Second},
		{name: "truncated", in: "4242 (api) S 1 2", wantErr: true},
		{name: "no parenthesis", in: "4242 api S", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcStat([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := Snapshot{At: t0, Busy: 10 * time.Second, Total: 40 * time.Second,
		Procs: map[string]time.Duration{"api": 2 * time.Second, "bench": time.Second, "gone": time.Second}}
	// 2 seconds later on 2 CPUs: 4 CPU-seconds passed, 3 of them busy.
	b := Snapshot{At: t0.Add(2 * time.Second), Busy: 13 * time.Second, Total: 44 * time.Second,
		Procs: map[string]time.Duration{"api": 3500 * time.Millisecond, "bench": 1500 * time.Millisecond, "new": time.Second}}
	u := Between(a, b, 2)
	if u.Machine != 150 || u.Capacity != 200 || u.Procs["api"] != 75 || u.Procs["bench"] != 25 || u.Other != 50 {
		t.Fatalf("usage = %+v", u)
	}
	if _, ok := u.Procs["new"]; ok {
		t.Fatal("a process missing from the first snapshot was counted")
	}
	if s := u.Summary(); !strings.HasPrefix(s, "machine 150% of 200%: api 75%, bench 25%, other 50%") {
		t.Fatalf("summary = %q", s)
	}
}
