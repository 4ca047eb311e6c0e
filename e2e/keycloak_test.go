//go:build keycloak || console

package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/order"
)

// keycloakURL is the Keycloak that `scripts/services up keycloak` runs
// (SECKILL_KEYCLOAK_URL to use another with the same realm).
func keycloakURL() string {
	if u := os.Getenv("SECKILL_KEYCLOAK_URL"); u != "" {
		return strings.TrimRight(u, "/")
	}
	return "http://127.0.0.1:18180"
}

// keycloakEnv points an api at the realm shop of the Keycloak at kc: its
// keys, issuer and audience, its realm role seckill-admin for operators.
func keycloakEnv(kc string) []string {
	return []string{
		"SECKILL_JWT_SECRET=",
		"SECKILL_JWT_JWKS_URL=" + kc + "/realms/shop/protocol/openid-connect/certs",
		"SECKILL_JWT_ISSUER=" + kc + "/realms/shop",
		"SECKILL_JWT_AUDIENCE=seckill-api",
		"SECKILL_JWT_ROLE_CLAIM=realm_access.roles",
		"SECKILL_JWT_ADMIN_ROLE=seckill-admin",
	}
}

// signIn gets an access token for user from the realm shop's token
// endpoint with the password grant, as a shop front's backend would.
func signIn(t *testing.T, user, password string) string {
	t.Helper()
	resp, err := http.PostForm(keycloakURL()+"/realms/shop/protocol/openid-connect/token", url.Values{
		"grant_type": {"password"}, "client_id": {"seckill-api"}, "username": {user}, "password": {password},
		"scope": {"openid"},
	})
	if err != nil {
		t.Fatalf("Keycloak at %s does not answer (run `scripts/services up keycloak`): %v", keycloakURL(), err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.AccessToken == "" {
		t.Fatalf("sign in as %s: %d %v %s", user, resp.StatusCode, err, body.Error)
	}
	return body.AccessToken
}

// subjectOf reads the sub of a token the test got from Keycloak itself.
func subjectOf(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	var c struct {
		Sub string `json:"sub"`
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(b, &c) != nil || c.Sub == "" {
		t.Fatalf("token payload: %v", err)
	}
	return c.Sub
}

// A buyer signs in at a real Keycloak and buys through the real programs:
// the api fetches the realm's keys, takes Keycloak's RS256 access token
// (issuer, audience, realm role for the operator who opens the sale), and
// the buyer, known by Keycloak's UUID subject, gets exactly one order of
// many clicks.
func TestKeycloakBuyerSignsInAndBuys(t *testing.T) {
	t.Parallel()
	kc := keycloakURL()
	operator := signIn(t, "operator", "operator-password")
	buyer := signIn(t, "buyer", "buyer-password")
	buyerSub := subjectOf(t, buyer)

	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 3})
	api := p.StartAPI(keycloakEnv(kc)...)
	api.Mint = func(sub, role string) string {
		if role == auth.RoleAdmin {
			return operator
		}
		return buyer // the buyer's own token, whatever sub the caller names
	}
	p.StartConsumer()
	sale := api.CreateSale(5, 1) // the operator's realm role opens the admin routes

	// The buyer's token is not an operator's.
	if code, _ := api.DoAs("GET", fmt.Sprintf("/admin/v1/items/%d/stock", sale.ItemID), buyerSub, "", nil, nil, nil); code != 403 {
		t.Fatalf("a buyer on an admin route: %d, want 403", code)
	}
	var (
		mu       sync.Mutex
		accepted = map[string]int64{}
		codes    = map[string]int{}
		wg       sync.WaitGroup
	)
	for i := range 10 {
		wg.Go(func() {
			pl, err := api.PlaceOrderAs(buyerSub, fmt.Sprintf("kc-click-%d", i), sale.ActivityID, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case pl.Code == 202:
				accepted[pl.OrderNo] = 0
			default:
				codes[pl.Error]++
			}
		})
	}
	wg.Wait()
	if len(accepted) != 1 || codes["ALREADY_PURCHASED"] != 9 {
		t.Fatalf("10 clicks: %d accepted, refusals %v; want 1 and 9 ALREADY_PURCHASED", len(accepted), codes)
	}
	final := p.WaitFinal(accepted, 60*time.Second)
	for no, o := range final {
		if o.Status != order.Created || o.UserID != buyerSub {
			t.Fatalf("order %s: %s of %q, want CREATED of Keycloak's subject %q", no, o.Status, o.UserID, buyerSub)
		}
		if st, _, err := api.OrderStatusAs(buyerSub, no); err != nil || st != "CREATED" {
			t.Fatalf("the buyer polls %s: %s %v", no, st, err)
		}
	}
	p.WaitDrained(sale.ItemID, 10*time.Second)
	if inv := p.Check(sale); inv.LiveOrders != 1 || inv.DBStock != 4 || inv.RedisStock != 4 || inv.UsersWithTwoLive != 0 {
		t.Fatalf("invariants: %+v", inv)
	}
	// A token of the same realm with its signature altered is refused.
	parts := strings.Split(buyer, ".")
	parts[2] = strings.Repeat("A", len(parts[2]))
	forged := strings.Join(parts, ".")
	api.Mint = func(string, string) string { return forged }
	if code, _ := api.DoAs("GET", "/api/v1/orders", buyerSub, "", nil, nil, nil); code != 401 {
		t.Fatalf("a forged Keycloak token: %d, want 401", code)
	}
	t.Logf("Keycloak subject %s bought once of 10 clicks", buyerSub)
}
