package config_test

import (
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/pkg/foundation/metrics"
)

func TestAdmin(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		def     string
		want    metrics.AdminConfig
		wantErr string
	}{
		{name: "default", def: "127.0.0.1:9100", want: metrics.AdminConfig{Addr: "127.0.0.1:9100", Optional: true}},
		{name: "no default", want: metrics.AdminConfig{Optional: true}},
		{name: "set", def: "127.0.0.1:9100", env: map[string]string{"SECKILL_ADMIN_ADDR": "0.0.0.0:9200", "SECKILL_PPROF": "true"},
			want: metrics.AdminConfig{Addr: "0.0.0.0:9200", Pprof: true}},
		{name: "off", def: "127.0.0.1:9100", env: map[string]string{"SECKILL_ADMIN_ADDR": "off"}, want: metrics.AdminConfig{}},
		{name: "not an address", env: map[string]string{"SECKILL_ADMIN_ADDR": "9100"}, wantErr: "SECKILL_ADMIN_ADDR"},
		{name: "any host", env: map[string]string{"SECKILL_ADMIN_ADDR": ":9100"}, want: metrics.AdminConfig{Addr: ":9100"}},
		{name: "named port", env: map[string]string{"SECKILL_ADMIN_ADDR": "127.0.0.1:metrics"}, wantErr: `SECKILL_ADMIN_ADDR="127.0.0.1:metrics"`},
		{name: "port too big", env: map[string]string{"SECKILL_ADMIN_ADDR": "127.0.0.1:99999"}, wantErr: "SECKILL_ADMIN_ADDR"},
		{name: "empty port", def: "127.0.0.1:9100", env: map[string]string{"SECKILL_ADMIN_ADDR": "localhost:"}, wantErr: "SECKILL_ADMIN_ADDR"},
		{name: "pprof without a listener", env: map[string]string{"SECKILL_PPROF": "true"}, wantErr: "SECKILL_PPROF=true needs"},
		{name: "pprof not a bool", def: "127.0.0.1:9100", env: map[string]string{"SECKILL_PPROF": "yes please"}, wantErr: "SECKILL_PPROF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := config.New(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			got := config.Admin(env, tc.def)
			err := env.Err()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Admin = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
