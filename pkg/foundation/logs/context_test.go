package logs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/seckill/seckill/pkg/foundation/logs"
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

func TestLogged(t *testing.T) {
	cause := errors.New("redis: connection refused")
	err := fmt.Errorf("place: %w", logs.Logged(cause))
	if !logs.IsLogged(err) || !errors.Is(err, cause) {
		t.Fatalf("IsLogged %v, Is cause %v", logs.IsLogged(err), errors.Is(err, cause))
	}
	if logs.IsLogged(cause) || logs.IsLogged(fmt.Errorf("place: %w", cause)) || logs.Logged(nil) != nil {
		t.Fatal("an error never marked reads as logged")
	}
}
