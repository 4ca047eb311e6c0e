package admission_test

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/pkg/admission"
)

// keyPair is a fixed test key pair: the same tokens on every run.
func keyPair(seed byte) (ed25519.PublicKey, ed25519.PrivateKey) {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	priv := ed25519.NewKeyFromSeed(s)
	return priv.Public().(ed25519.PublicKey), priv
}

var (
	now    = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	claims = admission.Claims{ActivityID: 7, UserID: "auth0|Ab.c", Expires: now.Add(2 * time.Minute)}
	macKey = []byte("the sale's secret")
)

// flip changes one bit of the decoded bytes of token's field'th
// dot-separated field.
func flip(t testing.TB, token string, field int) string {
	t.Helper()
	parts := strings.Split(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[field])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	parts[field] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// a1 is a token of the first version, as the api issued them before the
// signatures: the mac only.
func a1(key []byte, c admission.Claims) string {
	body := "a1." + strconv.FormatInt(c.ActivityID, 10) + "." + strconv.FormatInt(c.Expires.UnixMilli(), 10) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(c.UserID))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestVerify(t *testing.T) {
	pub, priv := keyPair(1)
	_, other := keyPair(2)
	tok := admission.Sign(priv, macKey, claims)
	got, err := admission.Verify(pub, tok, 7, claims.UserID, now, 0)
	if err != nil || got != claims {
		t.Fatalf("verify: %+v, %v; want %+v", got, err, claims)
	}
	// The body names the sale: a signed 7 changed to 8 is no longer signed.
	resold := strings.Replace(tok, "a2.7.", "a2.8.", 1)
	for _, tc := range []struct {
		name, token, user string
		activity          int64
		at                time.Time
		leeway            time.Duration
		want              error
	}{
		{"empty", "", claims.UserID, 7, now, 0, admission.ErrMalformed},
		{"garbage", "not a token", claims.UserID, 7, now, 0, admission.ErrMalformed},
		{"a field short", tok[:strings.LastIndex(tok, ".")], claims.UserID, 7, now, 0, admission.ErrMalformed},
		{"too long", tok + strings.Repeat("A", admission.MaxLen), claims.UserID, 7, now, 0, admission.ErrMalformed},
		{"an a1 token", a1(macKey, claims), claims.UserID, 7, now, 0, admission.ErrSignature},
		{"signature bit flipped", flip(t, tok, 5), claims.UserID, 7, now, 0, admission.ErrSignature},
		{"buyer bit flipped", flip(t, tok, 3), claims.UserID, 7, now, 0, admission.ErrSignature},
		{"sale changed", resold, claims.UserID, 8, now, 0, admission.ErrSignature},
		{"another key's", admission.Sign(other, macKey, claims), claims.UserID, 7, now, 0, admission.ErrSignature},
		{"another sale's", tok, claims.UserID, 8, now, 0, admission.ErrOtherSale},
		{"another buyer's", tok, "auth0|ab.c", 7, now, 0, admission.ErrOtherBuyer},
		{"expired", tok, claims.UserID, 7, claims.Expires, 0, admission.ErrExpired},
		{"expired past the leeway", tok, claims.UserID, 7, claims.Expires.Add(2 * time.Second), 2 * time.Second, admission.ErrExpired},
		{"within the leeway", tok, claims.UserID, 7, claims.Expires.Add(time.Second), 2 * time.Second, nil},
		{"a millisecond before", tok, claims.UserID, 7, claims.Expires.Add(-time.Millisecond), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := admission.Verify(pub, tc.token, tc.activity, tc.user, tc.at, tc.leeway)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			genuine := tc.want == nil || tc.want == admission.ErrOtherSale || tc.want == admission.ErrOtherBuyer || tc.want == admission.ErrExpired
			if genuine != (got == claims) {
				t.Fatalf("claims %+v with %v", got, err)
			}
		})
	}
}

// A caller's mistake is an error, not a refusal of the token.
func TestVerifyBadArguments(t *testing.T) {
	pub, priv := keyPair(1)
	tok := admission.Sign(priv, macKey, claims)
	for name, c := range map[string]struct {
		key    ed25519.PublicKey
		leeway time.Duration
	}{"no key": {nil, 0}, "a short key": {pub[:31], 0}, "negative leeway": {pub, -time.Second}} {
		_, err := admission.Verify(c.key, tok, 7, claims.UserID, now, c.leeway)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		for _, e := range []error{admission.ErrMalformed, admission.ErrSignature, admission.ErrOtherSale, admission.ErrOtherBuyer, admission.ErrExpired} {
			if errors.Is(err, e) {
				t.Errorf("%s: %v is a refusal of the token", name, err)
			}
		}
	}
}

// The issuer's check takes a2 and a1 tokens by their mac, whatever their
// signature, and refuses another secret's.
func TestCheckMAC(t *testing.T) {
	_, priv := keyPair(1)
	tok := admission.Sign(priv, macKey, claims)
	for name, token := range map[string]string{"a2": tok, "a1": a1(macKey, claims)} {
		if got, err := admission.CheckMAC(macKey, token, 7, claims.UserID, now); err != nil || got != claims {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
		if _, err := admission.CheckMAC([]byte("another secret"), token, 7, claims.UserID, now); !errors.Is(err, admission.ErrSignature) {
			t.Errorf("%s under another secret: %v", name, err)
		}
		if _, err := admission.CheckMAC(macKey, flip(t, token, 4), 7, claims.UserID, now); !errors.Is(err, admission.ErrSignature) {
			t.Errorf("%s with a bit of its mac flipped: %v", name, err)
		}
		if _, err := admission.CheckMAC(macKey, token, 7, claims.UserID, claims.Expires); !errors.Is(err, admission.ErrExpired) {
			t.Errorf("%s at its expiry: %v", name, err)
		}
	}
}

func TestParse(t *testing.T) {
	_, priv := keyPair(1)
	good := strings.Split(admission.Sign(priv, macKey, claims), ".")
	with := func(i int, v string) string {
		p := append([]string(nil), good...)
		p[i] = v
		return strings.Join(p, ".")
	}
	if tk, err := admission.Parse(strings.Join(good, ".")); err != nil || tk.Version != "a2" || tk.Claims != claims ||
		tk.Body != strings.Join(good[:4], ".") || len(tk.MAC) != 32 || len(tk.Signature) != 64 {
		t.Fatalf("parse: %+v %v", tk, err)
	}
	for name, token := range map[string]string{
		"version a3":         with(0, "a3"),
		"sale zero":          with(1, "0"),
		"sale negative":      with(1, "-7"),
		"sale with a plus":   with(1, "+7"),
		"sale with a zero":   with(1, "07"),
		"sale not a number":  with(1, "seven"),
		"sale over int64":    with(1, "9223372036854775808"),
		"expiry in seconds.": with(2, "1.5"),
		"expiry not decimal": with(2, "0x10"),
		"buyer empty":        with(3, ""),
		"buyer padded":       with(3, good[3]+"="),
		"buyer not base64":   with(3, "a+b/"),
		"mac short":          with(4, good[4][:40]),
		"signature short":    with(5, good[5][:80]),
		"signature not b64":  with(5, strings.Repeat("!", 86)),
		"seven fields":       strings.Join(good, ".") + ".x",
		"an a1 with six":     with(0, "a1"),
	} {
		if _, err := admission.Parse(token); !errors.Is(err, admission.ErrMalformed) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	pub, _ := keyPair(1)
	x := admission.FormatPublicKey(pub)
	if len(x) != 43 {
		t.Fatalf("formatted key %q", x)
	}
	j := `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`
	for name, s := range map[string]string{"base64url": x, "pasted with a newline": " " + x + "\n", "JWK": j} {
		if got, err := admission.ParsePublicKey(s); err != nil || !got.Equal(pub) {
			t.Errorf("%s: %x, %v", name, got, err)
		}
	}
	for name, s := range map[string]string{
		"empty": "", "padded": x + "=", "standard base64": strings.NewReplacer("-", "+", "_", "/").Replace(x) + "+/",
		"31 bytes": x[:42], "hex": strings.Repeat("ab", 32), "JWK of another curve": `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`,
		"JWK of another type": `{"kty":"EC","crv":"Ed25519","x":"` + x + `"}`, "broken JSON": `{"kty":`,
	} {
		if k, err := admission.ParsePublicKey(s); err == nil {
			t.Errorf("%s: key %x, no error", name, k)
		}
	}
}

// No input makes Parse or Verify panic, and whatever Parse takes, its
// claims make the same token again (one text per admission).
func FuzzVerify(f *testing.F) {
	pub, priv := keyPair(1)
	tok := admission.Sign(priv, macKey, claims)
	for _, s := range []string{tok, a1(macKey, claims), "", ".....", "a2.1.1.AA." + strings.Repeat("A", 43) + "." + strings.Repeat("A", 86), "a1.-1.-1.=.="} {
		f.Add(s, int64(7), claims.UserID)
	}
	f.Fuzz(func(t *testing.T, token string, activity int64, user string) {
		_, _ = admission.Verify(pub, token, activity, user, now, time.Second)
		_, _ = admission.CheckMAC(macKey, token, activity, user, now)
		_, _ = admission.ParsePublicKey(token)
		tk, err := admission.Parse(token)
		if err != nil {
			return
		}
		if tk.Version == "a2" {
			p := strings.Split(token, ".")
			again := strings.Split(admission.Sign(priv, macKey, tk.Claims), ".")
			if strings.Join(again[:4], ".") != strings.Join(p[:4], ".") {
				t.Fatalf("parsed %q as %+v, which signs as %q", token, tk.Claims, again)
			}
		}
	})
}

// ed25519.Verify against HMAC-SHA256: what a shop's check costs, and why
// the api checks the mac on every order instead.
func BenchmarkVerifyEd25519(b *testing.B) {
	pub, priv := keyPair(1)
	tok := admission.Sign(priv, macKey, claims)
	for b.Loop() {
		if _, err := admission.Verify(pub, tok, 7, claims.UserID, now, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckMAC(b *testing.B) {
	_, priv := keyPair(1)
	tok := admission.Sign(priv, macKey, claims)
	for b.Loop() {
		if _, err := admission.CheckMAC(macKey, tok, 7, claims.UserID, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	_, priv := keyPair(1)
	for b.Loop() {
		admission.Sign(priv, macKey, claims)
	}
}
