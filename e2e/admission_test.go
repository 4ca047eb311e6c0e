package e2e_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/internal/testkit/waittest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/admission"
	"github.com/seckill/seckill/pkg/domain/order"
)

// saleRoomKey reads sale's admission key from the admin route, in both its
// forms, and checks they are one key.
func saleRoomKey(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale) ed25519.PublicKey {
	t.Helper()
	var v struct {
		ActivityID int64           `json:"activity_id"`
		Algorithm  string          `json:"algorithm"`
		PublicKey  string          `json:"public_key"`
		JWK        json.RawMessage `json:"jwk"`
	}
	code, err := api.Do("GET", fmt.Sprintf("/admin/v1/activities/%d/room/key", s.ActivityID), 1, auth.RoleAdmin, nil, nil, &v)
	if err != nil || code != 200 || v.ActivityID != s.ActivityID || v.Algorithm != "Ed25519" {
		t.Fatalf("the room key of sale %d: %d %+v %v", s.ActivityID, code, v, err)
	}
	key, err := admission.ParsePublicKey(v.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if fromJWK, err := admission.ParsePublicKey(string(v.JWK)); err != nil || !fromJWK.Equal(key) {
		t.Fatalf("the JWK %s is not the key %s: %v", v.JWK, v.PublicKey, err)
	}
	return key
}

// admittedTo joins user to s's room and polls until the queue admits them.
func admittedTo(t *testing.T, api *pipelinetest.API, s pipelinetest.Sale, user int64) queueAnswer {
	t.Helper()
	queue(t, api, "POST", s, user)
	var q queueAnswer
	waittest.Until(t, 10*time.Second, fmt.Sprintf("buyer %d admitted to sale %d", user, s.ActivityID), func() bool {
		q = pollQueue(t, api, s, user)
		return q.State == "ADMITTED"
	})
	return q
}

// A shop verifies the admissions the api issued, offline, with
// pkg/admission and the key the admin route gives: the genuine one of the
// buyer, for the sale, until it expires; a forged one (a bit flipped,
// re-signed with another key), another sale's (under this sale's key, or
// under its own by a shop that picks the key by the token's sale), another
// buyer's and an expired one are refused, each with its error. The api takes the same
// admission for the order, and still takes an a1 admission (issued before
// the signatures) until it expires.
func TestShopVerifiesTheRoomsAdmissions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI()
	p.StartConsumer()
	room := map[string]any{"admit_per_second": 10, "admission_ttl_seconds": 60}
	s := api.CreateSaleWith(5, pipelinetest.SaleOptions{WaitingRoom: room})
	other := api.CreateSaleWith(5, pipelinetest.SaleOptions{WaitingRoom: room})
	const buyer, second = 1, 2
	adm, secondAdm, otherAdm := admittedTo(t, api, s, buyer), admittedTo(t, api, s, second), admittedTo(t, api, other, buyer)

	key, otherKey := saleRoomKey(t, api, s), saleRoomKey(t, api, other)
	if key.Equal(otherKey) {
		t.Fatal("two sales have one key")
	}
	again := p.StartAPI() // every instance derives the same key
	if k := saleRoomKey(t, again, s); !k.Equal(key) {
		t.Fatalf("another api's key for the sale: %x, want %x", k, key)
	}
	plain := api.CreateSale(5, 1)
	for name, c := range map[string]struct {
		sale       int64
		user       int64
		role, code string
		status     int
	}{
		"a sale without a room": {plain.ActivityID, 1, auth.RoleAdmin, "NOT_FOUND", 404},
		"no such sale":          {s.ActivityID + 1000, 1, auth.RoleAdmin, "NOT_FOUND", 404},
		"a buyer":               {s.ActivityID, buyer, "", "FORBIDDEN", 403},
	} {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if code, err := api.Do("GET", fmt.Sprintf("/admin/v1/activities/%d/room/key", c.sale), c.user, c.role, nil, nil, &e); err != nil ||
			code != c.status || e.Error.Code != c.code {
			t.Errorf("the room key for %s: %d %s %v, want %d %s", name, code, e.Error.Code, err, c.status, c.code)
		}
	}

	// The genuine admission: the buyer's, for the sale, until the queue
	// said it expires.
	user := strconv.FormatInt(buyer, 10)
	now := time.Now()
	got, err := admission.Verify(key, adm.Admission, s.ActivityID, user, now, 0)
	if err != nil || got.ActivityID != s.ActivityID || got.UserID != user || !got.Expires.Equal(adm.AdmissionExpiresAt) {
		t.Fatalf("the buyer's admission %q: %+v %v, want sale %d, buyer %s, until %s", adm.Admission, got, err,
			s.ActivityID, user, adm.AdmissionExpiresAt)
	}
	if !strings.HasPrefix(adm.Admission, "a2.") {
		t.Fatalf("the queue's admission %q is not an a2", adm.Admission)
	}

	_, stranger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(adm.Admission, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[5])
	sig[10] ^= 0x20
	flipped := strings.Join(append(parts[:5:5], base64.RawURLEncoding.EncodeToString(sig)), ".")
	for name, c := range map[string]struct {
		token, user string
		sale        int64
		key         ed25519.PublicKey
		at          time.Time
		want        error
	}{
		"a bit of the signature flipped":       {flipped, user, s.ActivityID, key, now, admission.ErrSignature},
		"re-signed with another key":           {admission.Sign(stranger, []byte("x"), got), user, s.ActivityID, key, now, admission.ErrSignature},
		"checked with another sale's key":      {adm.Admission, user, s.ActivityID, otherKey, now, admission.ErrSignature},
		"another sale's, with this sale's key": {otherAdm.Admission, user, s.ActivityID, key, now, admission.ErrSignature},
		"another sale's, with its key":         {otherAdm.Admission, user, s.ActivityID, otherKey, now, admission.ErrOtherSale},
		"another buyer's":                      {secondAdm.Admission, user, s.ActivityID, key, now, admission.ErrOtherBuyer},
		"expired":                              {adm.Admission, user, s.ActivityID, key, adm.AdmissionExpiresAt.Add(2 * time.Second), admission.ErrExpired},
		"garbage":                              {"a2.1.2.3.4.5", user, s.ActivityID, key, now, admission.ErrMalformed},
	} {
		if _, err := admission.Verify(c.key, c.token, c.sale, c.user, c.at, 2*time.Second); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// The other sale's admission is genuine there.
	if _, err := admission.Verify(otherKey, otherAdm.Admission, other.ActivityID, user, now, 0); err != nil {
		t.Fatalf("the other sale's admission with its key: %v", err)
	}

	// An a1 admission of the second buyer, as the api issued them before
	// the signatures (the mac under the sale's secret, until the ledger's
	// expiry): the shop cannot verify it, our api takes it. One already
	// expired is refused.
	act, err := p.DB.Activities.Activity(ctx, s.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	a1 := func(until time.Time) string {
		body := fmt.Sprintf("a1.%d.%d.%s", s.ActivityID, until.UnixMilli(), base64.RawURLEncoding.EncodeToString([]byte("2")))
		m := hmac.New(sha256.New, act.Room.Key[:])
		m.Write([]byte(body))
		return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	old := a1(secondAdm.AdmissionExpiresAt)
	if _, err := admission.Verify(key, old, s.ActivityID, "2", now, 0); !errors.Is(err, admission.ErrSignature) {
		t.Fatalf("the shop's check of an a1: %v, want %v", err, admission.ErrSignature)
	}
	if pl := orderAdmitted(t, api, s, second, 0, "a1-expired", a1(time.Now().Add(-time.Second))); pl.Code != 403 || pl.Error != "NOT_ADMITTED" {
		t.Fatalf("an order with an expired a1: %+v, want 403 NOT_ADMITTED", pl)
	}
	accepted := map[string]int64{}
	for _, c := range []struct {
		user  int64
		token string
	}{{buyer, adm.Admission}, {second, old}} {
		pl := orderAdmitted(t, api, s, c.user, 0, fmt.Sprintf("verified-%d", c.user), c.token)
		if pl.Code != 202 {
			t.Fatalf("buyer %d's order with %q: %+v, want 202", c.user, c.token[:3], pl)
		}
		accepted[pl.OrderNo] = c.user
	}
	for no, o := range p.WaitFinal(accepted, 30*time.Second) {
		if o.Status != order.Created || o.UserID != strconv.FormatInt(accepted[no], 10) || o.ActivityID != s.ActivityID {
			t.Errorf("order %s: %+v, want CREATED for buyer %d in sale %d", no, o, accepted[no], s.ActivityID)
		}
	}
}
