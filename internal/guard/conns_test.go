package guard

import (
	"net"
	"net/netip"
	"testing"
)

// TestConnKeys: an IPv6 client counts by its /64 (one host is usually
// given a whole /64, so its addresses are one client's), an IPv4 one by
// its address, an IPv4-mapped one as IPv4; a trusted proxy is exempt.
func TestConnKeys(t *testing.T) {
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	s := &sharedListener{l: ConnLimits{Exempt: proxy.Contains}}
	for addr, want := range map[string]struct {
		key    string
		exempt bool
	}{
		"203.0.113.7:5000":            {"203.0.113.7", false},
		"[::ffff:203.0.113.7]:5000":   {"203.0.113.7", false},
		"[2001:db8:1:2:aaaa::1]:5000": {"2001:db8:1:2::", false},
		"[2001:db8:1:2:bbbb::9]:443":  {"2001:db8:1:2::", false},
		"10.1.2.3:80":                 {"10.1.2.3", true},
		"[2001:db8:1:3::1%eth0]:80":   {"2001:db8:1:3::", false},
	} {
		ap, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		key, exempt := s.key(ap)
		if key.String() != want.key || exempt != want.exempt {
			t.Errorf("%s: key %s exempt %v; want %s %v", addr, key, exempt, want.key, want.exempt)
		}
	}
}
