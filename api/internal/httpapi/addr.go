package httpapi

import (
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
)

// Addresses configures what the api does with a client's address: the
// limit and the deny list on joins, draw entries and orders, and whose
// forwarding header names the client.
type Addresses struct {
	// PerAddress is the sustained rate of joins, draw entries and orders
	// per client address per second on this instance (burst twice that);
	// 0 disables it.
	PerAddress float64
	// Deny are the ranges whose joins, draw entries and orders are refused
	// (403 ADDRESS_DENIED).
	Deny []netip.Prefix
	// TrustedProxies are the peers whose Header is believed; empty, the
	// peer of the connection is the client.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header the trusted proxies set
	// (X-Forwarded-For or X-Real-IP); Gin walks it from the right, skipping
	// the trusted proxies' own addresses, to the first other one.
	Header string
}

// WithAddresses turns on the per-address limit and the deny list of a, and
// takes the client address from a's header when a trusted proxy sends it.
func WithAddresses(a Addresses) Option {
	return func(s *Server) {
		s.addrLimit, s.deny = newLimiter(a.PerAddress), newDenyList(a.Deny)
		s.proxies, s.ipHeader = a.TrustedProxies, a.Header
	}
}

// trustProxies tells r whose forwarding header to believe: no one's unless
// the operator named the proxies, since anyone can send the header.
func (s *Server) trustProxies(r *gin.Engine) {
	if len(s.proxies) == 0 {
		_ = r.SetTrustedProxies(nil) // nil never fails
		return
	}
	ranges := make([]string, len(s.proxies))
	for i, p := range s.proxies {
		ranges[i] = p.String()
	}
	if err := r.SetTrustedProxies(ranges); err != nil {
		// The ranges come from netip.Prefix, whose text always parses.
		panic("httpapi: trusted proxies: " + err.Error())
	}
	r.ForwardedByClientIP, r.RemoteIPHeaders = true, []string{s.ipHeader}
}

// clientAddr is the client's address as the limits and the deny list see
// it: Gin's client IP (the forwarding header's when a trusted proxy sent
// it, else the peer's), an IPv4-mapped IPv6 address as its IPv4 address so
// an IPv4 range holds it. False: no address could be read.
func clientAddr(c *gin.Context) (netip.Addr, bool) {
	a, err := netip.ParseAddr(c.ClientIP())
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// addrKey is the bucket of a client address: an IPv4 address is its own,
// an IPv6 address shares its /64's, since a single subscriber is handed a
// whole /64 and can send from any of its 2^64 addresses. Requests whose
// address cannot be read share one bucket.
func addrKey(c *gin.Context) string {
	a, ok := clientAddr(c)
	switch {
	case !ok:
		return ""
	case a.Is6():
		p, _ := a.Prefix(64)
		return p.String()
	default:
		return a.String()
	}
}

// guardAddr refuses a join, draw entry or order from a denied range, then
// applies the per-address bucket. It runs before authentication, so a
// denied range or a flood from one address costs no token check.
func (s *Server) guardAddr(c *gin.Context) {
	if s.deny != nil {
		if a, ok := clientAddr(c); ok && s.deny.contains(a) {
			writeError(c, http.StatusForbidden, "ADDRESS_DENIED", "requests from this network are refused")
			return
		}
	}
	if s.addrLimit != nil {
		if ok, wait := s.addrLimit.allow(addrKey(c), time.Now()); !ok {
			rateLimited(c, wait)
			return
		}
	}
	c.Next()
}

// denyList is a set of ranges looked up by the lengths it holds: an
// address is masked to each length and looked up, so a list of thousands
// of ranges (a cloud provider's) costs a few map lookups a request, not a
// scan.
type denyList struct {
	bits   []int // the distinct lengths, ascending
	ranges map[netip.Prefix]struct{}
}

// newDenyList returns the list of ranges, or nil for none.
func newDenyList(ranges []netip.Prefix) *denyList {
	if len(ranges) == 0 {
		return nil
	}
	d := &denyList{ranges: make(map[netip.Prefix]struct{}, len(ranges))}
	for _, p := range ranges {
		p = p.Masked()
		if !slices.Contains(d.bits, p.Bits()) {
			d.bits = append(d.bits, p.Bits())
		}
		d.ranges[p] = struct{}{}
	}
	slices.Sort(d.bits)
	return d
}

// contains reports whether a is in one of the ranges.
func (d *denyList) contains(a netip.Addr) bool {
	for _, b := range d.bits {
		p, err := a.Prefix(b)
		if err != nil {
			continue // an IPv6 length past an IPv4 address's 32 bits
		}
		if _, ok := d.ranges[p]; ok {
			return true
		}
	}
	return false
}
