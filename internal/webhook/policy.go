package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
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
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	// The deprecated IPv4-compatible form ::a.b.c.d: some stacks still
	// route it to a.b.c.d.
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	// Local-use NAT64 (RFC 8215) and 6to4 (RFC 3056) reach an IPv4
	// address carried inside them, which may be an internal one.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
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

// refusedAtDial is what a delivery refused at dial time records. It
// does not say which address the name resolved to, nor what kind it is:
// the tenant reads it, and the server's network is not the tenant's to
// map.
const refusedAtDial = "refused by the server's address policy: the endpoint's host resolves to an address deliveries may not reach (an operator allows such addresses with --webhook-allow-cidr)"

// Control checks the address a connection is about to dial (a
// net.Dialer's Control): after name resolution, so DNS cannot steer a
// delivery past the policy.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || p.Check(ap.Addr()) != nil {
		return ErrRefusedAddress
	}
	return nil
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
	if ip, ok := legacyIPv4(host); ok {
		return nil, fmt.Errorf("url host %s is an IPv4 address in a legacy numeric form: it means %s; write it as %s",
			host, ip, ip)
	}
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

// legacyIPv4 reads host as inet_aton(3) does, reporting whether it is an
// IPv4 address written in a form other than the dotted quad: one to four
// parts, each decimal, octal (a leading 0) or hexadecimal (0x), the last
// filling the bytes left (167772161, 0x0a000001, 012.0.0.1, 10.1). Go's
// resolver takes such a host for a name and looks it up, while curl, a
// browser or a proxy would connect to the address it means: a URL that
// names one address to a person and another to the server is refused.
func legacyIPv4(host string) (netip.Addr, bool) {
	if _, err := netip.ParseAddr(host); err == nil {
		return netip.Addr{}, false
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		v, ok := inetPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	// Every part but the last is a byte; the last fills the rest.
	var n uint64
	for _, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n = n<<8 | v
	}
	rest := uint(8 * (5 - len(vals)))
	last := vals[len(vals)-1]
	if last >= 1<<rest {
		return netip.Addr{}, false
	}
	n = n<<rest | last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// inetPart reads one part of a legacy IPv4 form.
func inetPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" alone is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	v, err := strconv.ParseUint(p, base, 32)
	return v, err == nil
}
