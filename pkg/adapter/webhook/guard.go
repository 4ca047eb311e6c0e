package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// A delivery's URL is the operator's to choose, and the relay sends from
// inside the shop's network: unguarded, an endpoint could point at Redis,
// the admin port or a cloud's metadata service (server-side request
// forgery). CheckURL refuses such an endpoint when it is registered, and
// the client NewClient makes refuses to connect to such an address when it
// sends, whatever the name resolved to then (a name that resolved to a
// public address at registration may resolve to a private one later).

// ErrURL is the error of an endpoint URL of the wrong form.
var ErrURL = errors.New("webhook endpoint URL")

// ErrRefusedAddress is the error of an endpoint on an address deliveries
// may not reach (loopback, private, link-local, ...).
var ErrRefusedAddress = errors.New("webhook endpoint address refused")

// refusedRange is a range of addresses deliveries may not reach, and why.
type refusedRange struct {
	prefix netip.Prefix
	why    string
}

var refusedRanges = []refusedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (0.0.0.0/8, which Linux connects to this host)`},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (100.64.0.0/10, RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata services live there)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast (240.0.0.0/4)"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local, fc00::/7)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// nat64 is the well-known prefix of NAT64 (RFC 6052): its addresses carry
// an IPv4 address in their last four bytes, and reach it.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refusal says why deliveries may not reach ip, or "" when they may. An
// IPv4 address written as IPv6 (::ffff:a.b.c.d, or NAT64's 64:ff9b::a.b.c.d)
// is judged as the IPv4 address it reaches.
func refusal(ip netip.Addr) string {
	ip = ip.WithZone("") // a prefix never contains an address with a zone
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	ip = ip.Unmap()
	for _, r := range refusedRanges {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	return ""
}

// checkAddr is nil when deliveries may reach ip, else an error saying
// which address and why not.
func checkAddr(ip netip.Addr, host string) error {
	why := refusal(ip)
	if why == "" {
		return nil
	}
	if host != ip.String() {
		return fmt.Errorf("%w: %s is %s, a %s address", ErrRefusedAddress, host, ip, why)
	}
	return fmt.Errorf("%w: %s is a %s address", ErrRefusedAddress, ip, why)
}

// CheckURL checks an endpoint's URL when it is registered: http or https,
// a host, no user or password (the secret signs; a password in the URL
// would be logged with it). Unless allowPrivate (a developer's machine, the
// tests), the host may be neither an address deliveries may not reach nor
// a name that resolves to one; resolving it is bounded by ctx.
func CheckURL(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q, want http or https", ErrURL, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: it holds a user name or password; the signature authenticates deliveries", ErrURL)
	case u.Hostname() == "":
		return fmt.Errorf("%w: no host", ErrURL)
	case allowPrivate:
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return checkAddr(ip, host)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%w: resolve %s: %v", ErrRefusedAddress, host, err)
	}
	for _, ip := range ips {
		if err := checkAddr(ip, host); err != nil {
			return err
		}
	}
	return nil
}

// NewClient returns the client deliveries are sent with. It gives up on a
// delivery after timeout (connecting, sending, waiting for and reading the
// answer); it does not follow redirects (a 3xx answer is a failed
// delivery: a redirect could lead anywhere); it goes through no proxy (the
// address checked must be the endpoint's). Unless allowPrivate, it refuses
// to connect to an address deliveries may not reach: the check runs on
// the address being connected to, after resolution, so a name that
// resolves to a private address (at any time) gets no connection.
func NewClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refuseDial
	}
	transport := &http.Transport{
		Proxy:             nil,
		DialContext:       dialer.DialContext,
		ForceAttemptHTTP2: true,
		MaxIdleConns:      512,
		// A dispatcher sends to one endpoint up to SECKILL_WEBHOOK_CONCURRENCY
		// (at most 256) at a time: each keeps its connection for the next.
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// refuseDial is the dialer's check of the address it is about to connect
// to: an IP and a port, whatever name was asked for.
func refuseDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: connect to %q: not an IP address and port", ErrRefusedAddress, address)
	}
	return checkAddr(ap.Addr(), ap.Addr().String()) // net's error names the address and port
}
