package room_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/admission"
	"github.com/seckill/seckill/pkg/domain/order"
	"github.com/seckill/seckill/pkg/domain/room"
)

func TestRankIsTheSeedsAndFitsAScore(t *testing.T) {
	a, b := room.NewSeed(), room.NewSeed()
	if a == b {
		t.Fatal("two seeds drawn alike")
	}
	if first, again := room.Rank(a, "1001"), room.Rank(a, "1001"); first != again {
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

// solve counts up until the solution has bits leading zero bits, as the
// waiting page does.
func solve(challenge string, bits int) string {
	for n := 0; ; n++ {
		if s := strconv.Itoa(n); room.Work(challenge, s) >= bits {
			return s
		}
	}
}

func TestProofOfWork(t *testing.T) {
	key := []byte("the sale's admission key")
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	c := room.NewChallenge(key, 7, "1001", now)
	if c == room.NewChallenge(key, 7, "1001", now) {
		t.Fatal("two challenges alike")
	}
	sol := solve(c, 12)
	if err := room.CheckWork(key, c, sol, 7, "1001", 12, now.Add(time.Minute)); err != nil {
		t.Fatalf("a solution of 12 bits: %v", err)
	}
	weak := solve(c, 0)
	for weak != "" && room.Work(c, weak) >= 12 {
		weak = "x" + weak
	}
	for _, tc := range []struct {
		name, challenge, solution, user string
		activity                        int64
		at                              time.Time
		why                             string
	}{
		{"no challenge", "", sol, "1001", 7, now, "asks for proof of work"},
		{"no solution", c, "", "1001", 7, now, "asks for proof of work"},
		{"forged", room.NewChallenge([]byte("other"), 7, "1001", now), sol, "1001", 7, now, "not one this sale issued"},
		{"another buyer", c, sol, "1002", 7, now, "another sale or buyer"},
		{"another sale", c, sol, "1001", 8, now, "another sale or buyer"},
		{"expired", c, sol, "1001", 7, now.Add(room.ChallengeTTL + time.Millisecond), "expired"},
		{"too weak", c, weak, "1001", 7, now, "leading zero bits"},
	} {
		err := room.CheckWork(key, tc.challenge, tc.solution, tc.activity, tc.user, 12, tc.at)
		if !errors.Is(err, order.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want an invalid argument: %q", tc.name, err, tc.why)
		}
	}
}

// The api's admissions are a2 tokens a shop verifies with the sale's
// public key; the key is the secret's every time, another secret's differs.
func TestAdmissionVerifiesWithThePublicKey(t *testing.T) {
	key := []byte("the sale's admission key")
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: now.Add(2 * time.Minute)}
	tok := room.Sign(key, adm)
	if !strings.HasPrefix(tok, "a2.") {
		t.Fatalf("token %q is not an a2", tok)
	}
	pub := room.PublicKey(key)
	if !pub.Equal(room.PublicKey(append([]byte(nil), key...))) || pub.Equal(room.PublicKey([]byte("another key"))) {
		t.Fatal("the public key is not a function of the secret alone")
	}
	if got, err := admission.Verify(pub, tok, 7, adm.UserID, now, 0); err != nil || got != adm {
		t.Fatalf("verify with the public key: %+v, %v", got, err)
	}
	if _, err := admission.Verify(room.PublicKey([]byte("another key")), tok, 7, adm.UserID, now, 0); !errors.Is(err, admission.ErrSignature) {
		t.Fatalf("verify with another sale's public key: %v", err)
	}
}

// An a1 token, issued before the signatures, still admits until it
// expires: the api checks its mac, as an a2's.
func TestAdmissionA1StillAdmits(t *testing.T) {
	key := []byte("the sale's admission key")
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: now.Add(2 * time.Minute)}
	body := "a1.7." + strconv.FormatInt(adm.Expires.UnixMilli(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(adm.UserID))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	tok := body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	if got, err := room.Verify(key, tok, 7, adm.UserID, now); err != nil || got != adm {
		t.Fatalf("an a1 within its time: %+v, %v", got, err)
	}
	if _, err := room.Verify(key, tok, 7, adm.UserID, adm.Expires); !errors.Is(err, order.ErrNotAdmitted) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an a1 at its expiry: %v", err)
	}
}

// A sale's Signer signs as Sign does, and signs for its key only.
func TestSignerIsSign(t *testing.T) {
	key := []byte("the sale's admission key")
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC)}
	sg := room.NewSigner(key)
	if got, want := sg.Sign(adm), room.Sign(key, adm); got != want {
		t.Fatalf("the signer's token %q, Sign's %q", got, want)
	}
	if !sg.Signs(key) || sg.Signs([]byte("another key")) {
		t.Fatal("Signs does not tell the signer's key")
	}
}

// What an admitted buyer's poll costs without a kept Signer: the key's
// derivation and the two signatures.
func BenchmarkSign(b *testing.B) {
	key := []byte("the sale's admission key")
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: time.Now().Add(2 * time.Minute)}
	for b.Loop() {
		room.Sign(key, adm)
	}
}

// And with the room's Signer, as the waiting room's service keeps one:
// the two signatures.
func BenchmarkSignerSign(b *testing.B) {
	sg := room.NewSigner([]byte("the sale's admission key"))
	adm := room.Admission{ActivityID: 7, UserID: "auth0|Ab.c", Expires: time.Now().Add(2 * time.Minute)}
	for b.Loop() {
		sg.Sign(adm)
	}
}
