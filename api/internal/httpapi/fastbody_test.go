package httpapi_test

import (
	"strings"
	"testing"

	"github.com/seckill/seckill/api/internal/httpapi"
)

// The bodies clients send take the fast path, with the values the strict
// decoder reads; everything else is left to the strict decoder.
func TestPlaceOrderFastPath(t *testing.T) {
	taken := []struct {
		body     string
		activity int64
		quantity int // 0: left out
	}{
		{`{"activity_id":7,"access_code":"K7QD-9XRT 2mwa_H4.Z"}`, 7, 0},
		{`{ "access_code" : "" , "quantity":1,"activity_id":8}`, 8, 1},
		{`{"activity_id":7}`, 7, 0},
		{`{"activity_id":7,"quantity":2}`, 7, 2},
		{` { "quantity" : 3 ,` + "\t\n\r" + `"activity_id":12 } `, 12, 3},
		{`{"activity_id":-5,"quantity":0}`, -5, 0}, // taken; Validate refuses it
		{`{"activity_id":123456789012345678}`, 123456789012345678, 0},
	}
	for _, c := range taken {
		var fast, strict httpapi.PlaceOrderBody
		if !httpapi.DecodePlaceOrderFast([]byte(c.body), &fast) {
			t.Errorf("%s: not taken by the fast path", c.body)
			continue
		}
		if err := httpapi.DecodeStrict([]byte(c.body), &strict); err != nil || fast != strict {
			t.Errorf("%s: fast %+v, strict %+v (%v)", c.body, fast, strict, err)
		}
		if fast.ActivityID != c.activity || (c.quantity != 0 && fast.Quantity.Value != c.quantity) {
			t.Errorf("%s: read %+v", c.body, fast)
		}
	}
	left := []string{
		``, `{}`, `{"quantity":1}`, `{"activity_id":null}`, `{"activity_id":1,"quantity":null}`,
		`{"activity_id":1.0}`, `{"activity_id":1e2}`, `{"activity_id":01}`, `{"activity_id":"1"}`,
		`{"activity_id":1234567890123456789}`, `{"Activity_id":1}`, `{"activity_id":1,"activity_id":2}`,
		`{"activity_id":1,"extra":2}`, `{"activity_id":1} x`, `{"activity_id":1,}`, `{"activity_id":1`,
		`{"activity\u005fid":1}`, `[{"activity_id":1}]`, "\ufeff" + `{"activity_id":1}`,
		`{"activity_id":1,"access_code":null}`, `{"activity_id":1,"access_code":7}`, `{"activity_id":1,"access_code":"a\u0041"}`,
		`{"activity_id":1,"access_code":"café"}`, `{"activity_id":1,"access_code":"a","access_code":"b"}`,
		`{"activity_id":1,"access_code":"` + strings.Repeat("A", 257) + `"}`, `{"activity_id":1,"access_code":"tab	here"}`,
		`{"activity_id":1,"access_code":"open`,
	}
	for _, body := range left {
		var b httpapi.PlaceOrderBody
		if httpapi.DecodePlaceOrderFast([]byte(body), &b) {
			t.Errorf("%q: taken by the fast path (%+v), want it left to the strict decoder", body, b)
		}
	}
}

func BenchmarkDecodePlaceOrder(b *testing.B) {
	body := []byte(`{"activity_id":12345,"quantity":1}`)
	for _, c := range []struct {
		name   string
		decode func([]byte, *httpapi.PlaceOrderBody) error
	}{
		{"fast", func(body []byte, v *httpapi.PlaceOrderBody) error { return httpapi.DecodeJSON(body, v) }},
		{"strict", func(body []byte, v *httpapi.PlaceOrderBody) error { return httpapi.DecodeStrict(body, v) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v httpapi.PlaceOrderBody
				if err := c.decode(body, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
