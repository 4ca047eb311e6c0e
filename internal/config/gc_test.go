package config_test

import (
	"runtime/debug"
	"testing"

	"github.com/seckill/seckill/internal/config"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestGCSetsTheTargetUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	if got := config.GC(config.New(lookupIn(nil))); got != config.DefaultGCPercent {
		t.Fatalf("GC without GOGC = %d, want %d", got, config.DefaultGCPercent)
	}
	if now := debug.SetGCPercent(config.DefaultGCPercent); now != config.DefaultGCPercent {
		t.Fatalf("collector target after GC = %d, want %d", now, config.DefaultGCPercent)
	}

	debug.SetGCPercent(150) // as if the runtime had read GOGC=150
	if got := config.GC(config.New(lookupIn(map[string]string{"GOGC": "150"}))); got != 150 {
		t.Fatalf("GC with GOGC set = %d, want the runtime's 150", got)
	}
	if now := debug.SetGCPercent(150); now != 150 {
		t.Fatalf("GC changed the target although GOGC was set: %d", now)
	}
}
