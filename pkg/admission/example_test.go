package admission_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/seckill/seckill/pkg/admission"
)

// checkout is a shop's own checkout handler for one sale, gated by the
// sale's waiting room: only a buyer the room admitted, in their turn, gets
// past the check. The buyer's admission comes in the X-Admission header,
// as the api takes it; the buyer's identity comes from the shop's own
// session (here a header, for the example).
func checkout(saleID int64, publicKey ed25519.PublicKey) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buyer := r.Header.Get("X-Buyer") // the "sub" of the buyer's access token
		_, err := admission.Verify(publicKey, r.Header.Get("X-Admission"), saleID, buyer, time.Now(), 2*time.Second)
		switch {
		case errors.Is(err, admission.ErrExpired):
			http.Error(w, "your turn is over: join the queue again", http.StatusForbidden)
			return
		case errors.Is(err, admission.ErrMalformed), errors.Is(err, admission.ErrSignature),
			errors.Is(err, admission.ErrOtherSale), errors.Is(err, admission.ErrOtherBuyer):
			http.Error(w, "wait for your turn in the queue", http.StatusForbidden)
			return
		case err != nil: // a mistake of ours (the key), not the buyer's
			http.Error(w, "checkout is misconfigured", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "welcome to checkout,", buyer)
	})
}

func Example() {
	// The operator reads the key once, from
	// GET /admin/v1/activities/{id}/room/key, into the shop's settings.
	// Here a key pair of the test stands in for the sale's.
	pub, priv := keyPair(1)
	setting := admission.FormatPublicKey(pub) // the answer's "public_key"

	publicKey, err := admission.ParsePublicKey(setting)
	if err != nil {
		panic(err) // refuse to start with a bad key
	}
	shop := httptest.NewServer(checkout(7, publicKey))
	defer shop.Close()

	// The token the queue gave buyer auth0|ab (the api signs them so).
	token := admission.Sign(priv, []byte("the api's secret"),
		admission.Claims{ActivityID: 7, UserID: "auth0|ab", Expires: time.Now().Add(time.Minute)})
	for _, c := range []struct{ buyer, token string }{
		{"auth0|ab", token},
		{"auth0|cd", token}, // someone else's turn
		{"auth0|ab", ""},    // no admission
	} {
		req, _ := http.NewRequest("POST", shop.URL, nil)
		req.Header.Set("X-Buyer", c.buyer)
		req.Header.Set("X-Admission", c.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(res.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// 200 welcome to checkout, auth0|ab
	// 403 wait for your turn in the queue
	// 403 wait for your turn in the queue
}
