package e2e_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
)

// idp is an identity provider as the api sees it: a JWKS endpoint over
// HTTP (served by the test on loopback) and the private key behind it,
// which signs access tokens the way Keycloak does (RS256, a kid, iss, aud,
// realm roles).
type idp struct {
	srv     *httptest.Server
	key     *rsa.PrivateKey
	kid     string
	issuer  string
	fetches atomic.Int64
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{key: key, kid: "e2e-rs256-1"}
	enc := base64.RawURLEncoding
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": p.kid,
		"n": enc.EncodeToString(key.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(p.srv.Close)
	p.issuer = p.srv.URL + "/realms/shop"
	return p
}

// env points an api at the provider, as an operator would for Keycloak.
func (p *idp) env() []string {
	return []string{
		"SECKILL_JWT_SECRET=", // the development secret is not used with a provider
		"SECKILL_JWT_JWKS_URL=" + p.srv.URL + "/realms/shop/protocol/openid-connect/certs",
		"SECKILL_JWT_ISSUER=" + p.issuer,
		"SECKILL_JWT_AUDIENCE=seckill-api",
		"SECKILL_JWT_ROLE_CLAIM=realm_access.roles",
		"SECKILL_JWT_ADMIN_ROLE=seckill-admin",
		"SECKILL_RATE_LIMIT_USER=100", // one buyer clicks 40 times at once below
	}
}

// mint signs an access token for sub (role "admin": the realm's
// seckill-admin role).
func (p *idp) mint(sub, role string) string {
	roles := []string{"offline_access"}
	if role == auth.RoleAdmin {
		roles = append(roles, "seckill-admin")
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"sub": sub, "iss": p.issuer, "aud": []string{"seckill-api", "account"}, "azp": "shop-web",
		"exp": time.Now().Add(5 * time.Minute).Unix(), "iat": time.Now().Unix(),
		"realm_access": map[string]any{"roles": roles},
	})
	tok.Header["kid"] = p.kid
	s, err := tok.SignedString(p.key)
	if err != nil {
		panic(err)
	}
	return s
}

// A buyer whose subject holds '{', '}', ':' and 128 characters buys exactly
// once through the real api, Kafka, consumer, MySQL and Redis, signed in
// with the provider's RS256 keys; UUID buyers around it buy their own, and
// every invariant holds, the reconciler's included.
func TestIdentityProviderBuyersWithStringSubjects(t *testing.T) {
	t.Parallel()
	provider := newIDP(t)
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI(provider.env()...)
	api.Mint = provider.mint
	p.StartConsumer()
	sale := api.CreateSale(20, 1) // as an admin signed in at the provider

	hostile := "{i" + fmt.Sprint(sale.ItemID) + "}:q:" + fmt.Sprint(sale.ActivityID) + ":" // another key's shape
	hostile += strings.Repeat("{:}", (order.MaxUserIDLen-len(hostile))/3)
	hostile += strings.Repeat("x", order.MaxUserIDLen-len(hostile))
	if len(hostile) != order.MaxUserIDLen {
		t.Fatalf("subject of %d characters", len(hostile))
	}
	// The same subject, numbered in a way that would collide if keys held
	// it raw: its Redis key segment, and a prefix of it.
	lookalikes := []string{hostile[:len(hostile)-1], "~" + base64.RawURLEncoding.EncodeToString([]byte(hostile))[:60]}

	// The hostile buyer clicks 30 times at once, each with a new key, and
	// replays one key 10 times; 10 UUID buyers and the lookalikes buy too.
	type attempt struct{ sub, key string }
	var attempts []attempt
	for i := range 30 {
		attempts = append(attempts, attempt{hostile, fmt.Sprintf("click-%d", i)})
	}
	for range 10 {
		attempts = append(attempts, attempt{hostile, "replayed"})
	}
	var uuids []string
	for i := range 10 {
		u := fmt.Sprintf("f3a1c9e2-7d4b-4c1e-9a63-%012d", i)
		uuids = append(uuids, u)
		attempts = append(attempts, attempt{u, "k"})
	}
	for _, u := range lookalikes {
		attempts = append(attempts, attempt{u, "k"})
	}
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // order number -> subject
		codes    = map[string]int{}
		wg       sync.WaitGroup
	)
	for _, a := range attempts {
		wg.Go(func() {
			pl, err := api.PlaceOrderAs(a.sub, a.key, sale.ActivityID, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("%q: %v", a.sub, err)
			case pl.Code == 202:
				if prev, ok := accepted[pl.OrderNo]; ok && prev != a.sub {
					t.Errorf("order %s answered to %q and %q", pl.OrderNo, prev, a.sub)
				}
				accepted[pl.OrderNo] = a.sub
			default:
				codes[pl.Error]++
			}
		})
	}
	wg.Wait()
	bySub := map[string][]string{}
	for no, sub := range accepted {
		bySub[sub] = append(bySub[sub], no)
	}
	if n := len(bySub[hostile]); n != 1 {
		t.Fatalf("the hostile subject holds %d orders (%v), want exactly 1; refusals %v", n, bySub[hostile], codes)
	}
	for _, u := range append(uuids, lookalikes...) {
		if len(bySub[u]) != 1 {
			t.Fatalf("buyer %q holds %d orders, want 1 (refusals %v)", u, len(bySub[u]), codes)
		}
	}
	// 30 clicks + 10 replays by one buyer: one order; the other clicks are
	// ALREADY_PURCHASED, and every replay is the same order again (202) or,
	// when it raced the order it replays, ALREADY_PURCHASED.
	if len(accepted) != 1+len(uuids)+len(lookalikes) || codes["ALREADY_PURCHASED"] < 29 || codes["SOLD_OUT"] != 0 {
		t.Fatalf("accepted %d, refusals %v", len(accepted), codes)
	}

	// MySQL has each order under the exact subject, CREATED.
	nos := map[string]int64{}
	for no := range accepted {
		nos[no] = 0
	}
	final := p.WaitFinal(nos, 60*time.Second)
	for no, o := range final {
		if o.Status != order.Created || o.UserID != accepted[no] {
			t.Fatalf("order %s: %s of %q, want CREATED of %q", no, o.Status, o.UserID, accepted[no])
		}
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	inv := p.Check(sale)
	if inv.UsersWithTwoLive != 0 || inv.LiveOrders != int64(len(accepted)) || inv.DBStock != inv.RedisStock ||
		inv.DBStock != 20-int64(len(accepted)) {
		t.Fatalf("invariants: %+v", inv)
	}
	// The buyer sees their order by its subject, in their list and by
	// number, and another buyer does not.
	no := bySub[hostile][0]
	if st, _, err := api.OrderStatusAs(hostile, no); err != nil || st != "CREATED" {
		t.Fatalf("the hostile buyer's order: %s %v", st, err)
	}
	if code, _ := api.DoAs("GET", "/api/v1/orders/"+no, lookalikes[0], "", nil, nil, nil); code != 404 {
		t.Fatalf("a lookalike reading the order: %d, want 404", code)
	}
	var list struct {
		Orders []struct {
			OrderNo string `json:"order_no"`
		} `json:"orders"`
	}
	if code, err := api.DoAs("GET", "/api/v1/orders", hostile, "", nil, nil, &list); err != nil || code != 200 ||
		len(list.Orders) != 1 || list.Orders[0].OrderNo != no {
		t.Fatalf("the hostile buyer's list: %d %+v %v", code, list, err)
	}
	// Quotas, reservations and idempotency records agree with MySQL.
	rep := reconcile(t, p, 0)
	if q := rep.Items[0].Activities[0]; len(q.QuotaMissing) != 0 || len(q.QuotaStale) != 0 {
		t.Fatalf("reconciler: %+v", q)
	}
	// A token without the provider's signature is refused, and the api
	// asked the provider for its keys a bounded number of times.
	forged := strings.Split(provider.mint(hostile, ""), ".")
	forged[2] = base64.RawURLEncoding.EncodeToString(make([]byte, 256))
	code, err := api.DoAs("GET", "/api/v1/orders", hostile, "", nil, nil, nil)
	if err != nil || code != 200 {
		t.Fatalf("control: %d %v", code, err)
	}
	api.Mint = func(string, string) string { return strings.Join(forged, ".") }
	if code, _ := api.DoAs("GET", "/api/v1/orders", hostile, "", nil, nil, nil); code != 401 {
		t.Fatalf("a forged signature: %d, want 401", code)
	}
	if n := provider.fetches.Load(); n < 1 || n > 3 {
		t.Fatalf("the api fetched the provider's keys %d times", n)
	}
}
