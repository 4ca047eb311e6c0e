package httpapi_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/seckill/seckill/api/internal/httpapi"
	"github.com/seckill/seckill/pkg/domain/order"
)

// FuzzDecodePlaceOrder feeds arbitrary bodies to the order decoder and
// validation. Neither may panic; a refusal is an INVALID_ARGUMENT with a
// short, valid UTF-8 message (it goes back to the client); an accepted body
// is one JSON object of the known fields whose values are in range. The
// seed corpus is testdata/fuzz/FuzzDecodePlaceOrder.
func FuzzDecodePlaceOrder(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, strict httpapi.PlaceOrderBody
		if httpapi.DecodePlaceOrderFast(body, &fast) {
			if err := httpapi.DecodeStrict(body, &strict); err != nil {
				t.Fatalf("body %q: the fast path took it, the strict decoder refuses it: %v", body, err)
			}
			if fast != strict {
				t.Fatalf("body %q: fast path read %+v, strict decoder %+v", body, fast, strict)
			}
		}
		var b httpapi.PlaceOrderBody
		err := httpapi.DecodeJSON(body, &b)
		if err == nil {
			checkAccepted(t, body)
			var q int
			q, err = b.Validate()
			if err == nil {
				checkValid(t, b, q)
				return
			}
		}
		if !errors.Is(err, order.ErrInvalidArgument) {
			t.Fatalf("body %q: error %v is not an invalid argument", body, err)
		}
		if msg := err.Error(); len(msg) > 512 || !utf8.ValidString(msg) {
			t.Fatalf("body %q: message unfit for a client (%d bytes, valid UTF-8 %v): %q",
				body, len(msg), utf8.ValidString(msg), msg)
		}
	})
}

// checkAccepted: what the decoder takes is a single JSON object (or null)
// with no field besides activity_id, item_id, quantity and access_code.
func checkAccepted(t *testing.T, body []byte) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("accepted a body that is not one JSON value: %q", body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("accepted a body that is not an object: %q", body)
	}
	for k := range fields {
		// encoding/json matches field names without regard to case.
		if !strings.EqualFold(k, "activity_id") && !strings.EqualFold(k, "quantity") && !strings.EqualFold(k, "item_id") &&
			!strings.EqualFold(k, "access_code") {
			t.Fatalf("accepted unknown field %q in %q", k, body)
		}
	}
}

// checkValid: a body that passed validation is in range, and says the same
// again once re-encoded.
func checkValid(t *testing.T, b httpapi.PlaceOrderBody, q int) {
	t.Helper()
	if b.ActivityID <= 0 || q < 1 || q > order.MaxQuantity {
		t.Fatalf("validated out of range: activity %d quantity %d", b.ActivityID, q)
	}
	if b.Quantity.Null || (!b.Quantity.Set && q != 1) || (b.Quantity.Set && b.Quantity.Value != q) {
		t.Fatalf("quantity %d, body said %+v", q, b.Quantity)
	}
	again, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var b2 httpapi.PlaceOrderBody
	if err := httpapi.DecodeJSON(again, &b2); err != nil {
		t.Fatalf("re-encoded body %s refused: %v", again, err)
	}
	if q2, err := b2.Validate(); err != nil || q2 != q || b2.ActivityID != b.ActivityID {
		t.Fatalf("re-encoded body %s reads as activity %d quantity %d (%v)", again, b2.ActivityID, q2, err)
	}
}

// FuzzDecodeEntry holds the entry body's fast path to the strict decoder:
// what the fast path takes, the strict decoder takes with the same values
// (which refuses "activity_id": the path names the sale). The seeds
// are the bodies clients send and a few near misses.
func FuzzDecodeEntry(f *testing.F) {
	for _, seed := range []string{`{}`, ` { } `, `{"item_id":3}`, `{"quantity":2,"item_id":7}`,
		`{"item_id":3,"access_code":"AB12-CD34"}`, `{"activity_id":1}`, `{"item_id":3,"item_id":4}`,
		`{"ITEM_ID":3}`, `{"item_id":null}`, `{"quantity":1.0}`, `{}x`, `{"item_id":3,}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, strict httpapi.EntryBody
		if !httpapi.DecodeEntryFast(body, &fast) {
			return
		}
		if err := httpapi.DecodeStrict(body, &strict); err != nil {
			t.Fatalf("body %q: the fast path took it, the strict decoder refuses it: %v", body, err)
		}
		if fast != strict {
			t.Fatalf("body %q: fast path read %+v, strict decoder %+v", body, fast, strict)
		}
	})
}
