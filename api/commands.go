package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/auth"
	"github.com/seckill/seckill/pkg/adapter/webhook"
	"github.com/seckill/seckill/pkg/domain/payment"
)

// The api's development commands: `api token`, `api sign-payment` and
// `api webhook-listen`.

// mintToken prints a signed development token.
func mintToken(args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("sub", "1", "user id: the sub claim (1-128 characters)")
	role := fs.String("role", "", `role claim ("admin" for the admin routes)`)
	iss := fs.String("iss", "", "iss claim (default $SECKILL_JWT_ISSUER)")
	aud := fs.String("aud", "", "aud claim (default $SECKILL_JWT_AUDIENCE)")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env := config.New(lookup)
	secret := config.JWTSecret(env)
	if err := env.Err(); err != nil {
		return err
	}
	if *iss == "" {
		*iss = env.String("SECKILL_JWT_ISSUER", "")
	}
	if *aud == "" {
		*aud = env.String("SECKILL_JWT_AUDIENCE", "")
	}
	tok, err := auth.Token{Subject: *user, Role: *role, Issuer: *iss, Audience: *aud, TTL: *ttl}.Sign(secret)
	if err != nil {
		return fmt.Errorf("token for user %q: %w", *user, err)
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}

// signPayment prints a payment notification signed with
// SECKILL_PAYMENT_SECRET, as the provider would send it: the signature
// header on the first line, the body on the second.
func signPayment(args []string, lookup func(string) (string, bool), stdout io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("sign-payment", flag.ContinueOnError)
	orderNo := fs.String("order-no", "", "the order paid (required)")
	amount := fs.Int64("amount", -1, "amount in the currency's minor units (required)")
	currency := fs.String("currency", "", "ISO 4217 code (required)")
	txID := fs.String("transaction-id", "", "the provider's transaction id (default: a new one)")
	at := fs.Int64("at", 0, "signing time, unix seconds (default: now)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *orderNo == "" || *amount < 0 || *currency == "" {
		return errors.New("sign-payment: --order-no, --amount and --currency are required")
	}
	env := config.New(lookup)
	secret := config.PaymentSecret(env)
	if err := env.Err(); err != nil {
		return err
	}
	if secret == nil {
		return errors.New("sign-payment: SECKILL_PAYMENT_SECRET is not set")
	}
	if *txID == "" {
		*txID = "tx_" + strconv.FormatInt(now.UnixNano(), 36)
	}
	if *at != 0 {
		now = time.Unix(*at, 0)
	}
	body, err := json.Marshal(payment.Notification{TransactionID: *txID, OrderNo: *orderNo, Amount: amount, Currency: *currency})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: %s\n%s\n", payment.Header, payment.Sign(secret, body, now), body)
	return err
}

// secretFlags is a flag given once per secret; its default prints nothing.
type secretFlags []string

func (s *secretFlags) String() string { return "" }

func (s *secretFlags) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// listenWebhooks receives webhook deliveries on 127.0.0.1 until ctx ends,
// as a shop's endpoint would (webhook.Receiver): each new event as a JSON
// line on stdout; refusals, duplicates and the address on stderr.
func listenWebhooks(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhook-listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 8099, "port on 127.0.0.1 (0: any free port)")
	var secrets secretFlags
	fs.Var(&secrets, "secret", "the endpoint's signing `secret`, whsec_...; give two while it is rotated\n"+
		"(default $SECKILL_WEBHOOK_SECRET, secrets separated by spaces)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if v, ok := lookup("SECKILL_WEBHOOK_SECRET"); ok && len(secrets) == 0 {
		secrets = strings.Fields(v)
	}
	if len(secrets) == 0 {
		return errors.New("webhook-listen: give --secret or set SECKILL_WEBHOOK_SECRET")
	}
	rc, err := webhook.NewReceiver(secrets, stdout, stderr)
	if err != nil {
		return fmt.Errorf("webhook-listen: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("webhook-listen: %w", err)
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("webhook-listen: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
