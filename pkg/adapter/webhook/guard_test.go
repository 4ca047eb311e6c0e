package webhook_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill/pkg/adapter/webhook"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url     string
		private error  // the error when private addresses are refused
		says    string // what that error says
		allowed error  // the error when they are allowed
	}{
		{"https://93.184.216.34/hooks/seckill", nil, "", nil},
		{"http://93.184.216.34:8080/hooks?token=t", nil, "", nil},
		{"https://[2606:2800:220:1::1]/hooks", nil, "", nil},
		{"http://172.15.255.255/", nil, "", nil},       // just below 172.16.0.0/12
		{"http://100.63.255.255/", nil, "", nil},       // just below 100.64.0.0/10
		{"http://100.128.0.0/", nil, "", nil},          // just above it
		{"http://11.0.0.1/", nil, "", nil},             // just above 10.0.0.0/8
		{"http://[64:ff9b::5db8:d822]/", nil, "", nil}, // NAT64 of 93.184.216.34
		{"http://127.0.0.1:8080/", webhook.ErrRefusedAddress, "127.0.0.1 is a loopback address", nil},
		{"http://127.1.2.3/", webhook.ErrRefusedAddress, "loopback", nil},
		{"http://10.1.2.3/", webhook.ErrRefusedAddress, "10.1.2.3 is a private (RFC 1918) address", nil},
		{"http://172.16.0.1/", webhook.ErrRefusedAddress, "private (RFC 1918)", nil},
		{"http://172.31.255.255/", webhook.ErrRefusedAddress, "private (RFC 1918)", nil},
		{"http://192.168.1.1/", webhook.ErrRefusedAddress, "private (RFC 1918)", nil},
		{"http://169.254.169.254/latest/meta-data/", webhook.ErrRefusedAddress, "link-local", nil},
		{"http://100.64.0.1/", webhook.ErrRefusedAddress, "carrier-grade NAT", nil},
		{"http://100.127.255.255/", webhook.ErrRefusedAddress, "carrier-grade NAT", nil},
		{"http://0.0.0.0:6379/", webhook.ErrRefusedAddress, `"this network"`, nil},
		{"http://224.0.0.1/", webhook.ErrRefusedAddress, "multicast", nil},
		{"http://255.255.255.255/", webhook.ErrRefusedAddress, "broadcast", nil},
		{"http://[::1]:9090/", webhook.ErrRefusedAddress, "::1 is a loopback address", nil},
		{"http://[::]/", webhook.ErrRefusedAddress, "unspecified", nil},
		{"http://[fd00::1]/", webhook.ErrRefusedAddress, "unique local", nil},
		{"http://[fe80::1%25eth0]/", webhook.ErrRefusedAddress, "link-local", nil},
		{"http://[ff02::1]/", webhook.ErrRefusedAddress, "multicast", nil},
		{"http://[::ffff:127.0.0.1]/", webhook.ErrRefusedAddress, "loopback", nil},
		{"http://[::ffff:10.0.0.1]/", webhook.ErrRefusedAddress, "private", nil},
		{"http://[::ffff:169.254.169.254]/", webhook.ErrRefusedAddress, "link-local", nil},
		{"http://[64:ff9b::7f00:1]/", webhook.ErrRefusedAddress, "loopback", nil},
		{"http://localhost:8080/", webhook.ErrRefusedAddress, "localhost is", nil}, // the resolved path
		{"ftp://93.184.216.34/", webhook.ErrURL, `scheme "ftp"`, webhook.ErrURL},
		{"93.184.216.34/hooks", webhook.ErrURL, `scheme ""`, webhook.ErrURL},
		{"https://user:pass@93.184.216.34/", webhook.ErrURL, "user name or password", webhook.ErrURL},
		{"https://user@93.184.216.34/", webhook.ErrURL, "user name or password", webhook.ErrURL},
		{"https:///hooks", webhook.ErrURL, "no host", webhook.ErrURL},
		{"http://%zz/", webhook.ErrURL, "", webhook.ErrURL},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := webhook.CheckURL(t.Context(), tt.url, false)
			if !is(err, tt.private) || tt.private != nil && !strings.Contains(err.Error(), tt.says) {
				t.Errorf("private refused: %v, want %v saying %q", err, tt.private, tt.says)
			}
			if err := webhook.CheckURL(t.Context(), tt.url, true); !is(err, tt.allowed) {
				t.Errorf("private allowed: %v, want %v", err, tt.allowed)
			}
		})
	}
}

// is reports whether err is want, nil meaning no error.
func is(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}
