//go:build chaos

package chaos

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seckill/seckill/internal/testkit/kafkatest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/domain/reservation"
)

func token(user int64) string { return pipelinetest.Token(user, "") }

func signed(method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		panic(err)
	}
	return s
}

func algNone(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc([]byte(claims)) + "."
}

// Hostile requests each get their documented 4xx, and none of them writes
// anything to Redis, Kafka or MySQL.
func TestChaosHostileInput(t *testing.T) {
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI("SECKILL_RATE_LIMIT_USER=0")
	sale := api.CreateSale(10, 2)
	// Another user's order to probe with: placed through Redis only.
	victim, err := api.PlaceOrder(500, "victim", sale.ActivityID, 1)
	if err != nil || victim.Code != 202 {
		t.Fatalf("victim order: %+v %v", victim, err)
	}
	ctx := context.Background()
	before, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
	if err != nil {
		t.Fatal(err)
	}
	keysBefore := redisKeys(t, p)
	lagBefore, err := kafkatest.GroupLag(ctx, p.Topic, "nobody-"+p.Group)
	if err != nil {
		t.Fatal(err)
	}

	exp := time.Now().Add(time.Hour).Unix()
	secret := []byte(pipelinetest.Secret)
	good := token(1)
	act := fmt.Sprint(sale.ActivityID)
	body := func(s string) string { return s }
	// Complete, valid JSON nested 600 deep (under the 4 KiB body limit).
	nested := `{"activity_id":` + strings.Repeat(`{"a":`, 600) + "1" + strings.Repeat("}", 600) + "}"
	tooDeepAndLong := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)

	type tc struct {
		name, method, path, tok, key, body string
		want                               int
	}
	order := func(name, tok, key, b string, want int) tc {
		return tc{name: name, method: "POST", path: "/api/v1/orders", tok: tok, key: key, body: b, want: want}
	}
	ok := `{"activity_id":` + act + `}`
	cases := []tc{
		// Tokens.
		order("no token", "", "k1", ok, 401),
		order("not a jwt", "garbage", "k1", ok, 401),
		order("expired", mustMint(secret, "1", -time.Hour), "k1", ok, 401),
		order("wrong key", mustMint([]byte("another-secret-0123456789abcdef0123"), "1", time.Hour), "k1", ok, 401),
		order("alg none", algNone(fmt.Sprintf(`{"sub":"1","exp":%d}`, exp)), "k1", ok, 401),
		order("alg none admin", algNone(fmt.Sprintf(`{"sub":"1","exp":%d,"role":"admin"}`, exp)), "k1", ok, 401),
		order("HS512", signed(jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "1", "exp": exp}), "k1", ok, 401),
		order("no exp", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "1"}), "k1", ok, 401),
		// Subjects are any string of 1-128 characters (an identity
		// provider's); these are none.
		order("sub empty", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "", "exp": exp}), "k1", ok, 401),
		order("sub too long", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": strings.Repeat("{", 129), "exp": exp}), "k1", ok, 401),
		order("sub fraction", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": 1.5, "exp": exp}), "k1", ok, 401),
		order("sub array", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": []string{"1"}, "exp": exp}), "k1", ok, 401),
		order("sub missing", signed(jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp}), "k1", ok, 401),
		order("token with spaces", "a b c", "k1", ok, 401),
		// Idempotency keys.
		order("no key", good, "", ok, 400),
		order("key too long", good, strings.Repeat("k", 65), ok, 400),
		order("key with quote", good, `k'1`, ok, 400),
		order("key with sql", good, "1;DROP TABLE orders", ok, 400),
		order("key with space", good, "a b", ok, 400),
		order("key with control char", good, "a\tb", ok, 400),
		order("key with unicode", good, "钥匙", ok, 400),
		order("key with colon", good, "a:b", ok, 400),
		order("key with braces", good, "{i1}", ok, 400),
		// Bodies.
		order("empty body", good, "k2", "", 400),
		order("not json", good, "k2", "hello", 400),
		order("truncated json", good, "k2", `{"activity_id":`, 400),
		order("array", good, "k2", `[1,2]`, 400),
		order("null", good, "k2", `null`, 400),
		order("unknown field", good, "k2", `{"activity_id":`+act+`,"user_id":2}`, 400),
		order("price injection", good, "k2", `{"activity_id":`+act+`,"price":0}`, 400),
		order("trailing data", good, "k2", ok+`{}`, 400),
		order("two objects", good, "k2", ok+ok, 400),
		order("deeply nested", good, "k2", nested, 400),
		order("deeply nested, over the size limit", good, "k2", tooDeepAndLong, 413),
		order("huge body", good, "k2", `{"activity_id":`+act+`,"x":"`+strings.Repeat("a", 8000)+`"}`, 413),
		order("activity string", good, "k2", `{"activity_id":"`+act+`"}`, 400),
		order("activity float", good, "k2", `{"activity_id":1.5}`, 400),
		order("activity zero", good, "k2", `{"activity_id":0}`, 400),
		order("activity negative", good, "k2", `{"activity_id":-1}`, 400),
		order("activity overflow", good, "k2", `{"activity_id":99999999999999999999999}`, 400),
		order("activity unknown", good, "k2", `{"activity_id":987654}`, 404),
		order("activity max int", good, "k2", `{"activity_id":9223372036854775807}`, 404),
		order("quantity zero", good, "k2", `{"activity_id":`+act+`,"quantity":0}`, 400),
		order("quantity negative", good, "k2", `{"activity_id":`+act+`,"quantity":-1}`, 400),
		order("quantity above limit", good, "k2", `{"activity_id":`+act+`,"quantity":3}`, 400),
		order("quantity huge", good, "k2", `{"activity_id":`+act+`,"quantity":2147483648}`, 400),
		order("quantity overflow", good, "k2", `{"activity_id":`+act+`,"quantity":1e40}`, 400),
		order("quantity string", good, "k2", `{"activity_id":`+act+`,"quantity":"1"}`, 400),
		order("quantity bool", good, "k2", `{"activity_id":`+act+`,"quantity":true}`, 400),
		order("quantity null object", good, "k2", `{"activity_id":`+act+`,"quantity":{}}`, 400),
		// Other users' orders and odd order numbers.
		{name: "read another's order", method: "GET", path: "/api/v1/orders/" + victim.OrderNo, tok: good, want: 404},
		{name: "pay another's order", method: "POST", path: "/api/v1/orders/" + victim.OrderNo + "/pay", tok: good, want: 404},
		{name: "cancel another's order", method: "POST", path: "/api/v1/orders/" + victim.OrderNo + "/cancel", tok: good, want: 404},
		{name: "unknown order", method: "GET", path: "/api/v1/orders/01KB00000000000000000000000-1", tok: good, want: 404},
		{name: "sql order number", method: "GET", path: "/api/v1/orders/1%27%20OR%20%271%27=%271", tok: good, want: 404},
		{name: "order number of a huge item", method: "GET", path: "/api/v1/orders/01KB0000000000000000000000-99999999999999999999", tok: good, want: 404},
		{name: "buyer on admin route", method: "POST", path: "/admin/v1/items", tok: good, body: body(`{"name":"x","stock":1}`), want: 403},
		{name: "admin warmup unknown", method: "POST", path: "/admin/v1/activities/987654/warmup", tok: pipelinetest.Token(1, auth.RoleAdmin), want: 404},
		{name: "admin negative stock", method: "POST", path: "/admin/v1/items", tok: pipelinetest.Token(1, auth.RoleAdmin), body: `{"name":"x","stock":-1}`, want: 400},
		{name: "admin bad window", method: "POST", path: "/admin/v1/activities", tok: pipelinetest.Token(1, auth.RoleAdmin),
			body: `{"item_id":` + fmt.Sprint(sale.ItemID) + `,"starts_at":"2030-01-02T00:00:00Z","ends_at":"2030-01-01T00:00:00Z"}`, want: 400},
		{name: "wrong method", method: "DELETE", path: "/api/v1/orders", tok: good, want: 405},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range cases {
		tally.hostile.Add(1)
		req, err := http.NewRequest(c.method, api.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.tok != "" {
			req.Header.Set("Authorization", "Bearer "+c.tok)
		}
		if c.key != "" {
			req.Header["Idempotency-Key"] = []string{c.key}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d (%s), want %d", c.name, resp.StatusCode, b, c.want)
		}
		if resp.StatusCode >= 400 && !strings.Contains(string(b), `"code"`) {
			t.Errorf("%s: error body %q lacks the error code", c.name, b)
		}
	}
	after, err := p.Store.Stock.Stock(ctx, reservation.One(sale.ItemID))
	if err != nil {
		t.Fatal(err)
	}
	keysAfter := redisKeys(t, p)
	lagAfter, err := kafkatest.GroupLag(ctx, p.Topic, "nobody-"+p.Group)
	if err != nil {
		t.Fatal(err)
	}
	rows := p.Count("SELECT COUNT(*) FROM orders")
	if before != after || !maps.Equal(keysBefore, keysAfter) || lagBefore != lagAfter || rows != 0 {
		t.Fatalf("hostile input wrote something: Redis %+v -> %+v, %d -> %d keys, topic %d -> %d messages, %d order rows",
			before, after, len(keysBefore), len(keysAfter), lagBefore, lagAfter, rows)
	}
	t.Logf("%d hostile inputs, each refused with its documented status; nothing written", len(cases))
}

func mustMint(secret []byte, user string, ttl time.Duration) string {
	s, err := auth.Mint(secret, user, "", ttl)
	if err != nil {
		panic(err)
	}
	return s
}

// redisKeys returns every key of the pipeline's prefix with its
// serialized value (DUMP), to compare before and after.
func redisKeys(t *testing.T, p *pipelinetest.Pipeline) map[string]string {
	t.Helper()
	ctx := context.Background()
	rdb := p.Redis
	out := map[string]string{}
	iter := rdb.Scan(ctx, 0, p.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		v, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("dump %s: %v", k, err)
		}
		out[k] = v
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
