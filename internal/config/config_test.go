package config_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/adapter/orderdb"
	"github.com/seckill/seckill/pkg/adapter/stockredis"
	"github.com/seckill/seckill/pkg/domain/access"
)

func TestRead(t *testing.T) {
	httpAddr := func(e *config.Env) any { return e.Addr("SECKILL_HTTP_ADDR", "127.0.0.1:8080") }
	redis := func(e *config.Env) any { return config.Redis(e) }
	mysql := func(e *config.Env) any { return config.MySQL(e) }
	kafka := func(e *config.Env) any { return config.Kafka(e).Brokers }
	level := func(e *config.Env) any { return config.LogLevel(e) }
	offset := func(e *config.Env) any { return config.TestClockOffset(e) }
	replicas := func(e *config.Env) any {
		c := config.Kafka(e)
		return [2]int{c.ReplicationFactor, c.MinInsyncReplicas}
	}
	addrs := func(e *config.Env) any { return config.Addresses(e) }
	guesses := func(e *config.Env) any {
		b, a := config.CodeGuesses(e)
		return [2]access.GuessLimit{b, a}
	}
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	redisCfg := func(addrs ...string) stockredis.Config { return stockredis.Config{Addrs: addrs, Prefix: "sk"} }
	const dsn = "u:p@tcp(db:3306)/shop?parseTime=true"
	cases := []struct {
		name    string
		env     map[string]string
		read    func(*config.Env) any
		want    any
		wantErr string // the error must contain it
		hidden  string // the error must not contain it
	}{
		{name: "http addr default", read: httpAddr, want: "127.0.0.1:8080"},
		{name: "code guesses default", read: guesses, want: [2]access.GuessLimit{access.DefaultGuessesPerBuyer, access.DefaultGuessesPerAddr}},
		{name: "code guesses set", env: map[string]string{"SECKILL_CODE_GUESSES_PER_BUYER": "5/1h", "SECKILL_CODE_GUESSES_PER_ADDR": "off"},
			read: guesses, want: [2]access.GuessLimit{{Max: 5, Per: time.Hour}, {}}},
		{name: "code guesses without a window", env: map[string]string{"SECKILL_CODE_GUESSES_PER_BUYER": "10"}, read: guesses, wantErr: `SECKILL_CODE_GUESSES_PER_BUYER="10"`},
		{name: "code guesses of none", env: map[string]string{"SECKILL_CODE_GUESSES_PER_ADDR": "0/10m"}, read: guesses, wantErr: "SECKILL_CODE_GUESSES_PER_ADDR"},
		{name: "http addr any host", env: map[string]string{"SECKILL_HTTP_ADDR": ":9000"}, read: httpAddr, want: ":9000"},
		{name: "http addr ipv6", env: map[string]string{"SECKILL_HTTP_ADDR": "[::1]:65535"}, read: httpAddr, want: "[::1]:65535"},
		{name: "http addr port 0", env: map[string]string{"SECKILL_HTTP_ADDR": "localhost:0"}, read: httpAddr, want: "localhost:0"},
		{name: "http addr without port", env: map[string]string{"SECKILL_HTTP_ADDR": "8080"}, read: httpAddr, wantErr: `SECKILL_HTTP_ADDR="8080": want host:port`},
		{name: "http addr empty port", env: map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:"}, read: httpAddr, wantErr: "SECKILL_HTTP_ADDR"},
		{name: "http addr named port", env: map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:http"}, read: httpAddr, wantErr: "SECKILL_HTTP_ADDR"},
		{name: "http addr port too big", env: map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:65536"}, read: httpAddr, wantErr: "SECKILL_HTTP_ADDR"},
		{name: "http addr negative port", env: map[string]string{"SECKILL_HTTP_ADDR": "127.0.0.1:-1"}, read: httpAddr, wantErr: "SECKILL_HTTP_ADDR"},

		{name: "redis default", read: redis, want: redisCfg("127.0.0.1:6379")},
		{name: "redis addr", env: map[string]string{"SECKILL_REDIS_ADDR": "redis:6380"}, read: redis, want: redisCfg("redis:6380")},
		{name: "redis addr map", env: map[string]string{"SECKILL_REDIS_ADDR_MAP": "10.0.0.5:7001=127.0.0.1:17001, 10.0.0.6:7002=127.0.0.1:17002"}, read: redis,
			want: stockredis.Config{Addrs: []string{"127.0.0.1:6379"}, Prefix: "sk", AddrMap: map[string]string{"10.0.0.5:7001": "127.0.0.1:17001", "10.0.0.6:7002": "127.0.0.1:17002"}}},
		{name: "redis addr map without =", env: map[string]string{"SECKILL_REDIS_ADDR_MAP": "10.0.0.5:7001"}, read: redis, wantErr: `SECKILL_REDIS_ADDR_MAP="10.0.0.5:7001": "10.0.0.5:7001": want announced=reachable`},
		{name: "redis addr map bad address", env: map[string]string{"SECKILL_REDIS_ADDR_MAP": "a:1=b"}, read: redis, wantErr: "SECKILL_REDIS_ADDR_MAP"},
		{name: "redis addrs", env: map[string]string{"SECKILL_REDIS_ADDRS": "r1:7000, r2:7001", "SECKILL_REDIS_ADDR": "unused:1"},
			read: redis, want: redisCfg("r1:7000", "r2:7001")},
		{name: "redis bad addr", env: map[string]string{"SECKILL_REDIS_ADDR": "redis"}, read: redis, wantErr: `SECKILL_REDIS_ADDR="redis"`},
		{name: "redis bad element", env: map[string]string{"SECKILL_REDIS_ADDRS": "r1:7000,r2,r3:x"}, read: redis,
			wantErr: `SECKILL_REDIS_ADDRS="r1:7000,r2,r3:x": "r2", "r3:x": want host:port`},

		{name: "mysql default", read: mysql, want: orderdb.Config{DSN: orderdb.DefaultDSN, MaxOpenConns: 32}},
		{name: "mysql dsn", env: map[string]string{"SECKILL_MYSQL_DSN": dsn}, read: mysql, want: orderdb.Config{DSN: dsn, MaxOpenConns: 32}},
		{name: "mysql garbage dsn", env: map[string]string{"SECKILL_MYSQL_DSN": "garbage"}, read: mysql, wantErr: "SECKILL_MYSQL_DSN: invalid DSN"},
		{name: "mysql dsn password not echoed", env: map[string]string{"SECKILL_MYSQL_DSN": "u:hunter2@tcp(db:3306"}, read: mysql,
			wantErr: "SECKILL_MYSQL_DSN: invalid DSN", hidden: "hunter2"},
		{name: "mysql bad dsn param", env: map[string]string{"SECKILL_MYSQL_DSN": "u:hunter2@tcp(db:3306)/shop?parseTime=maybe"}, read: mysql,
			wantErr: "SECKILL_MYSQL_DSN: invalid bool value", hidden: "hunter2"},

		{name: "kafka default", read: kafka, want: []string{"127.0.0.1:9092"}},
		{name: "kafka brokers", env: map[string]string{"SECKILL_KAFKA_BROKERS": "k1:9092, k2:9093,"}, read: kafka, want: []string{"k1:9092", "k2:9093"}},
		{name: "kafka broker without port", env: map[string]string{"SECKILL_KAFKA_BROKERS": "k1:9092,kafka"}, read: kafka,
			wantErr: `SECKILL_KAFKA_BROKERS="k1:9092,kafka": "kafka": want host:port`},
		{name: "kafka broker bad port", env: map[string]string{"SECKILL_KAFKA_BROKERS": "kafka:99999"}, read: kafka, wantErr: "SECKILL_KAFKA_BROKERS"},
		{name: "kafka no brokers", env: map[string]string{"SECKILL_KAFKA_BROKERS": " , "}, read: kafka, wantErr: "SECKILL_KAFKA_BROKERS"},

		{name: "kafka replication default", read: replicas, want: [2]int{1, 1}},
		{name: "kafka replication 3", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "3"}, read: replicas, want: [2]int{3, 2}},
		{name: "kafka replication 2", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "2"}, read: replicas, want: [2]int{2, 2}},
		{name: "kafka min insync set", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "3", "SECKILL_KAFKA_MIN_INSYNC_REPLICAS": "3"},
			read: replicas, want: [2]int{3, 3}},
		{name: "kafka min insync above replication", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "3", "SECKILL_KAFKA_MIN_INSYNC_REPLICAS": "4"},
			read: replicas, wantErr: `SECKILL_KAFKA_MIN_INSYNC_REPLICAS="4": at most SECKILL_KAFKA_REPLICATION_FACTOR (3)`},
		{name: "kafka min insync default above set replication", env: map[string]string{"SECKILL_KAFKA_MIN_INSYNC_REPLICAS": "2"},
			read: replicas, wantErr: "SECKILL_KAFKA_MIN_INSYNC_REPLICAS"},
		{name: "kafka replication zero", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "0"}, read: replicas,
			wantErr: `SECKILL_KAFKA_REPLICATION_FACTOR="0": want an integer from 1 to 32`},
		{name: "kafka replication not a number", env: map[string]string{"SECKILL_KAFKA_REPLICATION_FACTOR": "three"}, read: replicas,
			wantErr: "SECKILL_KAFKA_REPLICATION_FACTOR"},
		{name: "kafka min insync zero", env: map[string]string{"SECKILL_KAFKA_MIN_INSYNC_REPLICAS": "0"}, read: replicas,
			wantErr: "SECKILL_KAFKA_MIN_INSYNC_REPLICAS"},

		{name: "log level default", read: level, want: "info"},
		{name: "log level any case", env: map[string]string{"SECKILL_LOG_LEVEL": "DEBUG"}, read: level, want: "debug"},
		{name: "log level warn", env: map[string]string{"SECKILL_LOG_LEVEL": "Warn"}, read: level, want: "warn"},
		{name: "log level error", env: map[string]string{"SECKILL_LOG_LEVEL": "error"}, read: level, want: "error"},
		{name: "log level unknown", env: map[string]string{"SECKILL_LOG_LEVEL": "verbose"}, read: level,
			wantErr: `SECKILL_LOG_LEVEL="verbose": want debug, info, warn or error`},
		{name: "log level warning", env: map[string]string{"SECKILL_LOG_LEVEL": "warning"}, read: level, wantErr: "SECKILL_LOG_LEVEL"},

		{name: "test clock offset unset", read: offset, want: time.Duration(0)},
		{name: "test clock offset negative", env: map[string]string{"SECKILL_TEST_CLOCK_OFFSET": "-5s"}, read: offset, want: -5 * time.Second},
		{name: "test clock offset positive", env: map[string]string{"SECKILL_TEST_CLOCK_OFFSET": "1m30s"}, read: offset, want: 90 * time.Second},
		{name: "addresses default", read: addrs, want: config.ClientAddresses{Header: "X-Forwarded-For"}},
		{name: "addresses every form", env: map[string]string{
			"SECKILL_DENY_CIDRS":       " 203.0.113.0/24, 2001:db8::/32,198.51.100.7 , 2001:db8:1::9, ::ffff:192.0.2.0/120",
			"SECKILL_TRUSTED_PROXIES":  "10.0.0.0/8,fd00::/8",
			"SECKILL_CLIENT_IP_HEADER": "x-real-ip",
		}, read: addrs, want: config.ClientAddresses{
			Deny:           pfx("203.0.113.0/24", "2001:db8::/32", "198.51.100.7/32", "2001:db8:1::9/128", "192.0.2.0/24"),
			TrustedProxies: pfx("10.0.0.0/8", "fd00::/8"), Header: "X-Real-Ip"}},
		{name: "deny bad entry named", env: map[string]string{"SECKILL_DENY_CIDRS": "203.0.113.0/24,10.0.0.0/33,2001:db8::/32"},
			read: addrs, wantErr: `SECKILL_DENY_CIDRS="203.0.113.0/24,10.0.0.0/33,2001:db8::/32": "10.0.0.0/33": want a CIDR range`},
		{name: "deny host bits set", env: map[string]string{"SECKILL_DENY_CIDRS": "10.0.0.1/8"},
			read: addrs, wantErr: `"10.0.0.1/8": has bits set past /8 (the range is 10.0.0.0/8)`},
		{name: "deny hostname", env: map[string]string{"SECKILL_DENY_CIDRS": "example.com"}, read: addrs, wantErr: `"example.com": want a CIDR range`},
		{name: "deny zone", env: map[string]string{"SECKILL_DENY_CIDRS": "fe80::1%eth0"}, read: addrs, wantErr: `"fe80::1%eth0": want a CIDR range`},
		{name: "deny only commas", env: map[string]string{"SECKILL_DENY_CIDRS": ",,"}, read: addrs, wantErr: "SECKILL_DENY_CIDRS"},
		{name: "proxies bad entry named", env: map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8,proxy.local"},
			read: addrs, wantErr: `SECKILL_TRUSTED_PROXIES="10.0.0.0/8,proxy.local": "proxy.local": want a CIDR range`},
		{name: "proxies everyone v4", env: map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8,0.0.0.0/0"},
			read: addrs, wantErr: "0.0.0.0/0 trusts every address"},
		{name: "proxies everyone v6", env: map[string]string{"SECKILL_TRUSTED_PROXIES": "::/0"}, read: addrs, wantErr: "::/0 trusts every address"},
		{name: "header without proxies", env: map[string]string{"SECKILL_CLIENT_IP_HEADER": "X-Real-IP"},
			read: addrs, wantErr: `SECKILL_CLIENT_IP_HEADER="X-Real-IP": no proxy is trusted to set it`},
		{name: "header not a name", env: map[string]string{"SECKILL_CLIENT_IP_HEADER": "X Forwarded", "SECKILL_TRUSTED_PROXIES": "10.0.0.1"},
			read: addrs, wantErr: `SECKILL_CLIENT_IP_HEADER="X Forwarded": want a header name`},

		{name: "test clock offset garbage", env: map[string]string{"SECKILL_TEST_CLOCK_OFFSET": "soon"}, read: offset, wantErr: `SECKILL_TEST_CLOCK_OFFSET="soon"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := config.New(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			got := tc.read(env)
			err := env.Err()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %s", err, tc.wantErr)
				}
				if tc.hidden != "" && strings.Contains(err.Error(), tc.hidden) {
					t.Fatalf("err = %v shows %q", err, tc.hidden)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// Every problem is reported at once.
func TestReadReportsEveryProblem(t *testing.T) {
	bad := map[string]string{
		"SECKILL_MYSQL_DSN":           "garbage",
		"SECKILL_KAFKA_BROKERS":       "kafka",
		"SECKILL_KAFKA_WRITE_TIMEOUT": "soon",
		"SECKILL_LOG_LEVEL":           "loud",
		"SECKILL_HTTP_ADDR":           "8080",
	}
	env := config.New(func(k string) (string, bool) { v, ok := bad[k]; return v, ok })
	config.LogLevel(env)
	env.Addr("SECKILL_HTTP_ADDR", "127.0.0.1:8080")
	config.MySQL(env)
	config.Kafka(env)
	err := env.Err()
	for name := range bad {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("err = %v, want one naming %s", err, name)
		}
	}
}
