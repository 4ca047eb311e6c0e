package logs_test

import (
	"context"
	"testing"

	"github.com/seckill/seckill/pkg/logs"
)

func TestRequestID(t *testing.T) {
	if got := logs.RequestID(context.Background()); got != "" {
		t.Fatalf("RequestID of a bare context = %q", got)
	}
	ctx := logs.WithRequestID(context.Background(), "abc-1")
	if got := logs.RequestID(ctx); got != "abc-1" {
		t.Fatalf("RequestID = %q, want abc-1", got)
	}
}
