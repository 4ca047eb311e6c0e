package activity_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/activity"
	"github.com/seckill/seckill/pkg/domain/order"
)

func ptr[T any](v T) *T { return &v }

func TestNewWaitingRoom(t *testing.T) {
	open := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	s, err := activity.NewWaitingRoom(ptr(500), nil, nil, &open)
	if err != nil {
		t.Fatal(err)
	}
	if want := (activity.WaitingRoom{AdmitPerSecond: 500, AdmissionTTL: 120 * time.Second, OpensAt: open}); s != want {
		t.Fatalf("settings %+v, want %+v", s, want)
	}
	for _, tc := range []struct {
		name             string
		admit, ttl, bits *int
		field            string
	}{
		{"admit left out", nil, nil, nil, "admit_per_second is required"},
		{"admit zero", ptr(0), nil, nil, "admit_per_second must be"},
		{"admit too many", ptr(100_001), nil, nil, "admit_per_second must be"},
		{"ttl too short", ptr(1), ptr(9), nil, "admission_ttl_seconds"},
		{"ttl too long", ptr(1), ptr(3601), nil, "admission_ttl_seconds"},
		{"bits negative", ptr(1), nil, ptr(-1), "proof_of_work_bits"},
		{"bits too many", ptr(1), nil, ptr(25), "proof_of_work_bits"},
	} {
		_, err := activity.NewWaitingRoom(tc.admit, tc.ttl, tc.bits, nil)
		if !errors.Is(err, order.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an invalid argument naming %q", tc.name, err, tc.field)
		}
	}
	if (activity.WaitingRoom{}).On() {
		t.Fatal("the zero settings are a room")
	}
}
