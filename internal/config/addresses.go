package config

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"unicode"
)

// ClientAddresses is how the api tells a buyer's address and which
// addresses it refuses: the deny list, and the proxies whose forwarding
// header it believes.
type ClientAddresses struct {
	// Deny are the ranges whose joins, draw entries and orders are refused.
	Deny []netip.Prefix
	// TrustedProxies are the peers whose Header names the client; a
	// request from any other peer is that peer's own.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header the trusted proxies set.
	Header string
}

// Addresses reads SECKILL_DENY_CIDRS, SECKILL_TRUSTED_PROXIES and
// SECKILL_CLIENT_IP_HEADER. A header without a trusted proxy is refused, as
// is a trusted range holding every address: both settings would do
// nothing, or let any client forge its address, while the operator thinks
// otherwise.
func Addresses(e *Env) ClientAddresses {
	a := ClientAddresses{
		Deny:           e.Prefixes("SECKILL_DENY_CIDRS"),
		TrustedProxies: e.Prefixes("SECKILL_TRUSTED_PROXIES"),
		Header:         "X-Forwarded-For",
	}
	for _, p := range a.TrustedProxies {
		if p.Bits() == 0 {
			v, _ := e.get("SECKILL_TRUSTED_PROXIES")
			e.fail("SECKILL_TRUSTED_PROXIES", v, fmt.Sprintf("%s trusts every address: any client could forge its own; name the proxies' ranges", p))
			a.TrustedProxies = nil
			break
		}
	}
	if v, ok := e.get("SECKILL_CLIENT_IP_HEADER"); ok {
		switch {
		case !validHeaderName(v):
			e.fail("SECKILL_CLIENT_IP_HEADER", v, "want a header name such as X-Forwarded-For or X-Real-IP")
		case len(a.TrustedProxies) == 0:
			e.fail("SECKILL_CLIENT_IP_HEADER", v, "no proxy is trusted to set it: name the proxies in SECKILL_TRUSTED_PROXIES")
		default:
			a.Header = http.CanonicalHeaderKey(v)
		}
	}
	return a
}

// validHeaderName reports whether s is an HTTP header name (an RFC 9110
// token).
func validHeaderName(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return s != ""
}

// wantPrefix says what an element of a list of ranges must be.
const wantPrefix = "want a CIDR range such as 203.0.113.0/24 or 2001:db8::/32, or one address"

// Prefixes returns the comma-separated variable of CIDR ranges, IPv4 or
// IPv6 (an address alone is its /32 or /128), or nil; each bad element is
// named. A range with bits set past its length (10.0.0.1/8) is refused
// rather than masked: it is more likely a typo than a range. An IPv4 range
// written in IPv6 (::ffff:192.0.2.0/120) becomes the IPv4 range, the form
// client addresses are compared in.
func (e *Env) Prefixes(name string) []netip.Prefix {
	v, _ := e.get(name)
	list := e.List(name, nil)
	var out []netip.Prefix
	var bad []string
	for _, s := range list {
		p, err := parsePrefix(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q: %v", s, err))
			continue
		}
		out = append(out, p)
	}
	if len(bad) > 0 {
		e.fail(name, v, strings.Join(bad, "; "))
		return nil
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errors.New(wantPrefix)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New(wantPrefix)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("has bits set past /%d (the range is %s)", p.Bits(), m)
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, nil
}
