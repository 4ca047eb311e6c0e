package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/seckill/seckill/internal/testkit/mysqltest"
	"github.com/seckill/seckill/internal/testkit/pipelinetest"
)

// The programs refuse to start on bad configuration, naming the variable,
// before they do any work (no migration, no topic, no connection), and never
// print the secret.
func TestProgramsRefuseBadConfig(t *testing.T) {
	t.Parallel()
	const weak = "weak-secret-XYZ"
	type badConfig struct {
		name, program string
		env           []string
		want          string
	}
	cases := []badConfig{
		{"api without secret", "api", []string{"SECKILL_JWT_SECRET="}, "SECKILL_JWT_SECRET is required"},
		{"api with weak secret", "api", []string{"SECKILL_JWT_SECRET=" + weak}, "SECKILL_JWT_SECRET: must be at least 32 bytes"},
		{"consumer with bad batch", "consumer", []string{"SECKILL_CONSUMER_BATCH=lots"}, "SECKILL_CONSUMER_BATCH"},
		{"api with weak payment secret", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "SECKILL_PAYMENT_SECRET=" + weak}, "SECKILL_PAYMENT_SECRET: must be at least 32 bytes"},
		{"api with bad buyer pay", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "SECKILL_BUYER_PAY=maybe"}, "SECKILL_BUYER_PAY"},
		{"api with bad timeout", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "SECKILL_KAFKA_WRITE_TIMEOUT=-1s"}, "SECKILL_KAFKA_WRITE_TIMEOUT"},
		{"api with a JWKS and a secret", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "SECKILL_JWT_JWKS_URL=http://127.0.0.1:1/certs"},
			"SECKILL_JWT_SECRET and SECKILL_JWT_JWKS_URL are both set"},
		{"api with HS256 for a JWKS", "api", []string{"SECKILL_JWT_SECRET=", "SECKILL_JWT_JWKS_URL=http://127.0.0.1:1/certs", "SECKILL_JWT_ALGORITHMS=RS256,HS256"},
			"SECKILL_JWT_ALGORITHMS"},
		{"api with alg none for a JWKS", "api", []string{"SECKILL_JWT_SECRET=", "SECKILL_JWT_JWKS_URL=http://127.0.0.1:1/certs", "SECKILL_JWT_ALGORITHMS=none"},
			"SECKILL_JWT_ALGORITHMS"},
		{"api with a JWKS URL that is not one", "api", []string{"SECKILL_JWT_SECRET=", "SECKILL_JWT_JWKS_URL=file:///etc/passwd"},
			"SECKILL_JWT_JWKS_URL"},
		{"api with a trace exporter it lacks", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "OTEL_TRACES_EXPORTER=zipkin"}, "OTEL_TRACES_EXPORTER"},
		{"consumer with an unknown sampler", "consumer", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_SAMPLER=sometimes"}, "OTEL_TRACES_SAMPLER"},
		{"api over OTLP gRPC", "api", []string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
	}
	// Each bad value, for every program that reads the variable.
	all := []string{"api", "consumer", "reconciler"}
	for _, b := range []struct {
		env, want string
		programs  []string
	}{
		{"SECKILL_MYSQL_DSN=garbage", "SECKILL_MYSQL_DSN: invalid DSN", all},
		{"SECKILL_HTTP_ADDR=8080", "SECKILL_HTTP_ADDR=", []string{"api"}},
		{"SECKILL_REDIS_ADDR=redis", "SECKILL_REDIS_ADDR=", all},
		{"SECKILL_REDIS_ADDRS=127.0.0.1:7000,redis", "SECKILL_REDIS_ADDRS=", all},
		{"SECKILL_KAFKA_BROKERS=127.0.0.1:9092,kafka:broker", "SECKILL_KAFKA_BROKERS=", []string{"api", "consumer"}},
		{"SECKILL_LOG_LEVEL=verbose", "SECKILL_LOG_LEVEL=", all},
		{"SECKILL_ADMIN_ADDR=127.0.0.1:99999", "SECKILL_ADMIN_ADDR=", all},
		{"SECKILL_TEST_CLOCK_OFFSET=soon", "SECKILL_TEST_CLOCK_OFFSET=", all},
	} {
		for _, prog := range b.programs {
			cases = append(cases, badConfig{prog + " with " + b.env, prog,
				[]string{"SECKILL_JWT_SECRET=" + pipelinetest.Secret, b.env}, b.want})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(pipelinetest.Binary(t, tc.program))
			cmd.Env = append(os.Environ(), tc.env...)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the program did not exit")
			}
			if err == nil {
				t.Fatalf("exit 0 with bad config; output %s", out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "invalid configuration") {
				t.Fatalf("output %s does not say %q while checking the configuration", out, tc.want)
			}
			if strings.Contains(string(out), weak) {
				t.Fatalf("the secret appears in the output: %s", out)
			}
		})
	}
}

// A running API never logs its secret.
func TestSecretNeverLogged(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1})
	api := p.StartAPI("SECKILL_LOG_LEVEL=debug")
	consumer := p.StartConsumer("SECKILL_LOG_LEVEL=debug")
	sale := api.CreateSale(5, 1)
	pl, err := api.PlaceOrder(1, "k", sale.ActivityID, 1)
	if err != nil || pl.Code != 202 {
		t.Fatalf("%+v %v", pl, err)
	}
	p.WaitFinal(map[string]int64{pl.OrderNo: 1}, 30*time.Second)
	rec := p.Reconcile("--item", fmt.Sprint(sale.ItemID))

	cfg, err := mysqldrv.ParseDSN(mysqltest.BaseDSN())
	if err != nil || cfg.Passwd == "" {
		t.Fatalf("the test DSN has no password to look for: %v", err)
	}
	tok := pipelinetest.Token(1, "")
	secrets := map[string]string{
		"its JWT secret":     pipelinetest.Secret,
		"its payment secret": pipelinetest.PaymentSecret,
		"a bearer token":     tok[strings.LastIndexByte(tok, '.')+1:],
		"the MySQL password": ":" + cfg.Passwd + "@",
	}
	for who, log := range map[string]string{"api": api.Log(), "consumer": consumer.Log(), "reconciler": rec.Stdout + rec.Stderr} {
		for what, s := range secrets {
			if strings.Contains(log, s) {
				t.Errorf("the %s logged %s", who, what)
			}
		}
	}
}
