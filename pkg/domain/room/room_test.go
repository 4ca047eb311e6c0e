package room_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
)

func ptr[T any](v T) *T { return &v }

func TestNewSettings(t *testing.T) {
	open := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	s, err := room.NewSettings(ptr(500), nil, nil, &open)
	if err != nil {
		t.Fatal(err)
	}
	if want := (room.Settings{AdmitPerSecond: 500, AdmissionTTL: 120 * time.Second, OpensAt: open}); s != want {
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
		_, err := room.NewSettings(tc.admit, tc.ttl, tc.bits, nil)
		if !errors.Is(err, order.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an invalid argument naming %q", tc.name, err, tc.field)
		}
	}
	if (room.Settings{}).On() {
		t.Fatal("the zero settings are a room")
	}
}

func TestRankIsTheSeedsAndFitsAScore(t *testing.T) {
	a, b := room.NewSeed(), room.NewSeed()
	if a == b {
		t.Fatal("two seeds drawn alike")
	}
	if room.Rank(a, "1001") != room.Rank(a, "1001") {
		t.Fatal("a rank changed with the same seed")
	}
	differ := 0
	for _, u := range []string{"1", "2", "3", "auth0|x", "1001"} {
		r := room.Rank(a, u)
		if r >= 1<<room.RankBits {
			t.Fatalf("rank %d has more than %d bits", r, room.RankBits)
		}
		if r != room.Rank(b, u) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("another seed gave every buyer the same rank")
	}
	if len(a.Commitment()) != 64 || a.Commitment() == b.Commitment() || a.Commitment() == a.String() {
		t.Fatalf("commitment %q of seed %q", a.Commitment(), a.String())
	}
}

func TestAdmission(t *testing.T) {
	key := []byte("the sale's admission key")
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: now.Add(2 * time.Minute)}
	tok := room.Sign(key, adm)
	got, err := room.Verify(key, tok, 7, "auth0|Ab.c", now)
	if err != nil || got != adm {
		t.Fatalf("verify: %+v, %v; want %+v", got, err, adm)
	}
	forged := room.Sign([]byte("another key"), adm)
	tampered := strings.Replace(tok, ".7.", ".8.", 1)
	for _, tc := range []struct {
		name, token, user string
		activity          int64
		at                time.Time
		why               string
	}{
		{"missing", "", adm.UserID, 7, now, "X-Admission"},
		{"garbage", "not a token", adm.UserID, 7, now, "not one this sale issued"},
		{"forged", forged, adm.UserID, 7, now, "not one this sale issued"},
		{"tampered", tampered, adm.UserID, 8, now, "not one this sale issued"},
		{"another sale", tok, adm.UserID, 8, now, "another sale"},
		{"another buyer", tok, "auth0|ab.c", 7, now, "another buyer"},
		{"expired", tok, adm.UserID, 7, adm.Expires, "expired"},
	} {
		_, err := room.Verify(key, tc.token, tc.activity, tc.user, tc.at)
		if !errors.Is(err, order.ErrNotAdmitted) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want not admitted: %q", tc.name, err, tc.why)
		}
	}
}
