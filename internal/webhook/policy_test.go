package webhook

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestPolicyRefusesInternalAddresses: loopback, private, link-local (the
// metadata service), CGNAT, unspecified, multicast and reserved
// addresses are refused, in IPv4 and IPv6, also when written as IPv6
// forms of an IPv4 address; public ones pass; an operator's prefix
// allows what it covers and nothing else.
func TestPolicyRefusesInternalAddresses(t *testing.T) {
	refused := []string{"127.0.0.1", "127.9.9.9", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fd00::1",
		"fe80::1", "fe80::1%eth0", "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
		"::10.0.0.1", "::a00:1", "64:ff9b:1::a00:1", "2002:a00:1::1", "fec0::1", "198.18.0.1", "198.19.255.255", "192.0.0.8"}
	allowed := []string{"8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2001:4860:4860::8888", "64:ff9b::808:808"}
	var p Policy
	for _, a := range refused {
		err := p.Check(netip.MustParseAddr(a))
		if !errors.Is(err, ErrRefusedAddress) || !strings.Contains(err.Error(), "--webhook-allow-cidr") {
			t.Errorf("%s: %v; want it refused, saying how to allow it", a, err)
		}
	}
	for _, a := range allowed {
		if err := p.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s: %v; want it allowed", a, err)
		}
	}
	if err := p.Check(netip.MustParseAddr("169.254.169.254")); !strings.Contains(err.Error(), "metadata") {
		t.Errorf("the metadata address: %v; want it named", err)
	}

	allow, err := ParseAllow([]string{"10.0.0.0/8", "fd00::/8,127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p = Policy{Allow: allow}
	for _, a := range []string{"10.1.2.3", "fd12::1", "127.0.0.1", "::ffff:10.0.0.1"} {
		if err := p.Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("%s with the allow list: %v", a, err)
		}
	}
	for _, a := range []string{"127.0.0.2", "192.168.1.1", "169.254.169.254", "fe80::1"} {
		if err := p.Check(netip.MustParseAddr(a)); err == nil {
			t.Errorf("%s: allowed by a list that does not cover it", a)
		}
	}
	if _, err := ParseAllow([]string{"10.0.0.0/33"}); err == nil {
		t.Error("a bad prefix parsed")
	}
	if _, err := ParseAllow([]string{"intranet"}); err == nil {
		t.Error("a name parsed as a prefix")
	}
}

// TestCheckURL: what an endpoint may be registered with, and the errors
// for what it may not.
func TestCheckURL(t *testing.T) {
	var p Policy
	for _, ok := range []string{"https://hooks.example.com/sparecap", "http://203.0.113.7:8080/x?y=1", "https://[2001:db8::1]/h"} {
		if _, err := p.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for raw, want := range map[string]string{
		"ftp://example.com/":                 "https://",
		"example.com/hook":                   "https://",
		"https://user:pw@example.com/":       "user name or password",
		"https://:pw@example.com/":           "user name or password",
		"https:///path":                      "no host",
		"https://example.com/#frag":          "fragment",
		"https://10.0.0.5/hook":              "10.0.0.5 is a private address",
		"http://127.0.0.1:9000/":             "loopback",
		"http://169.254.169.254/latest":      "metadata",
		"http://[::1]/":                      "loopback",
		"http://localhost:8080/":             "localhost names this server itself",
		"http://api.localhost/":              "names this server itself",
		"https://example.com:0/":             "bad port",
		"https://example.com:99999/":         "bad port",
		"https://ex ample.com/":              "not a URL",
		"https://example.com/" + long(2100):  "at most 2048",
		"http://[fe80::1%25eth0]:80/":        "link-local",
		"http://[::10.0.0.1]/":               "IPv4-compatible",
		"http://[2002:a00:1::1]/":            "6to4",
		"http://167772161/":                  "legacy numeric form",
		"http://0x0a000001/":                 "legacy numeric form",
		"http://0x7f000001/":                 "means 127.0.0.1",
		"http://012.0.0.1/":                  "means 10.0.0.1",
		"http://10.1/":                       "means 10.0.0.1",
		"http://8.8.2056/":                   "means 8.8.8.8; write it as 8.8.8.8",
		"http://0X08.8.8.8/":                 "means 8.8.8.8",
		"http://1.2.3.4.5/":                  "", // not an address in any form: a name
		"http://4294967296/":                 "", // too large for an address: a name
		"http://123.example.com/":            "",
		"https://metadata.google.internal/x": "",
	} {
		_, err := p.CheckURL(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("%.60s: %v; want it accepted (it is checked when dialled)", raw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%.60s: %v; want an error saying %q", raw, err, want)
		}
	}
	allow, _ := ParseAllow([]string{"127.0.0.0/8"})
	if _, err := (Policy{Allow: allow}).CheckURL("http://localhost:8080/"); err != nil {
		t.Errorf("localhost with loopback allowed: %v", err)
	}
}

func long(n int) string { return strings.Repeat("a", n) }

// FuzzCheckURL: whatever a tenant registers, CheckURL never panics, and a
// URL it accepts has a host that is neither a literal address the policy
// refuses nor an IPv4 address in a legacy numeric form.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/x", "http://10.1/", "http://0x7f.1/", "http://[::10.0.0.1]/",
		"http://167772161/", "http://8.8.8.8:80/", "http://[2002:a00:1::1]/", "http://012.0.0.1./"} {
		f.Add(s)
	}
	var p Policy
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := p.CheckURL(raw)
		if err != nil {
			return
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if ip, err := netip.ParseAddr(host); err == nil && p.Check(ip) != nil {
			t.Fatalf("%q accepted with a refused address %s", raw, ip)
		}
		if ip, legacy := legacyIPv4(host); legacy {
			t.Fatalf("%q accepted with a legacy form of %s", raw, ip)
		}
	})
}
