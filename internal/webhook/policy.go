package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// Policy says which addresses deliveries may go to. A project chooses
// its endpoints' URLs, so without a policy anyone with a project token
// could make the server send requests into its own network: to the cloud
// metadata service, a database on loopback, an admin page on the private
// network (server-side request forgery). Deliveries to the addresses
// below are refused unless the operator allows their prefix.
//
// The address checked is the one dialled (Control, on every connection
// the delivery client opens), so a name that resolves to a public
// address at registration and to a private one later (DNS rebinding)
// gets nowhere. A URL whose host is a literal address is also checked
// when it is registered, for a clear error then rather than failed
// deliveries later.
type Policy struct {
	// Allow are the prefixes of refused addresses the operator allows
	// (--webhook-allow-cidr).
	Allow []netip.Prefix
}

// refusedRanges are the addresses a delivery may not reach unless
// allowed, with what to call them in an error.
var refusedRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud metadata services answer there)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved or broadcast address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// nat64 is the well-known NAT64 prefix: its addresses stand for the IPv4
// address in their last 32 bits, which is what gets reached.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// ParseAllow reads --webhook-allow-cidr values: CIDR prefixes, or single
// addresses.
func ParseAllow(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil {
					return nil, fmt.Errorf("%q is not a CIDR prefix (10.0.0.0/8, fd00::/8) or an address", s)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// ErrRefusedAddress is wrapped by the error of a delivery, or a URL,
// whose address the policy refuses.
var ErrRefusedAddress = errors.New("refused by the server's address policy")

// Check returns nil if a delivery may go to ip, or an error that says
// what kind of address it is and how an operator allows it.
func (p Policy) Check(ip netip.Addr) error {
	// A zoned address matches no prefix: check it without its zone.
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return fmt.Errorf("%w: no address", ErrRefusedAddress)
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, a := range p.Allow {
		if a.Contains(ip) {
			return nil
		}
	}
	for _, r := range refusedRanges {
		if r.prefix.Contains(ip) {
			return fmt.Errorf("%w: %s is %s; deliveries there need the operator to allow %s with --webhook-allow-cidr",
				ErrRefusedAddress, ip, r.what, r.prefix)
		}
	}
	return nil
}

// Control checks the address a connection is about to dial (a
// net.Dialer's Control): after name resolution, so DNS cannot steer a
// delivery past the policy.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address %q", ErrRefusedAddress, address)
	}
	return p.Check(ap.Addr())
}

// MaxURLLen bounds an endpoint's URL.
const MaxURLLen = 2048

// CheckURL returns the URL an endpoint may be registered with, or an
// error a person can act on: only http and https, a host, no user name
// or password, no fragment, and a host that is not a literal address the
// policy refuses (names are checked when they are dialled).
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLen {
		return nil, fmt.Errorf("url is %d characters; at most %d", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url %q is not a URL: %v", raw, errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url must start with https:// (or http://); got %q", raw)
	case u.User != nil:
		return nil, errors.New("url must not carry a user name or password (user:pass@host): the signature of each delivery tells the receiver it comes from sparecap")
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("url %q has no host", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, fmt.Errorf("url must not have a #fragment: it is never sent")
	case u.Opaque != "":
		return nil, fmt.Errorf("url %q is not a URL a request can be sent to", raw)
	}
	if port := u.Port(); port != "" {
		if _, err := net.LookupPort("tcp", port); err != nil || strings.HasPrefix(port, "0") {
			return nil, fmt.Errorf("url has a bad port %q", port)
		}
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := p.Check(ip); err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
	} else if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		// Such names resolve to loopback wherever they are looked up.
		if err := p.Check(netip.MustParseAddr("127.0.0.1")); err != nil {
			return nil, fmt.Errorf("url: %s names this server itself: %w", host, err)
		}
	}
	return u, nil
}
