package httptool

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

// specialPurpose is every block of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (RFC 6890 and its updates, as published in 2025),
// written out here independently of the guard's own table, with the
// registry's "globally reachable" column and the guard's decision. The
// guard refuses every block, also the few the registry marks globally
// reachable (see the package doc). Two blocks are judged by the IPv4
// address they carry instead, in checkEmbedded: ::ffff:0:0/96 (IPv4-mapped:
// the kernel dials the IPv4 address) and 64:ff9b::/96 (NAT64).
var specialPurpose = []struct {
	block  string
	name   string
	global string // the registry's column: True, False or N/A
}{
	{"0.0.0.0/8", "this network", "False"},
	{"0.0.0.0/32", "this host on this network", "False"},
	{"10.0.0.0/8", "private-use", "False"},
	{"100.64.0.0/10", "shared address space", "False"},
	{"127.0.0.0/8", "loopback", "False"},
	{"169.254.0.0/16", "link local", "False"},
	{"172.16.0.0/12", "private-use", "False"},
	{"192.0.0.0/24", "IETF protocol assignments", "False"},
	{"192.0.0.0/29", "IPv4 service continuity prefix", "False"},
	{"192.0.0.8/32", "IPv4 dummy address", "False"},
	{"192.0.0.9/32", "PCP anycast", "True"},
	{"192.0.0.10/32", "TURN anycast", "True"},
	{"192.0.0.170/32", "NAT64/DNS64 discovery", "False"},
	{"192.0.0.171/32", "NAT64/DNS64 discovery", "False"},
	{"192.0.2.0/24", "documentation TEST-NET-1", "False"},
	{"192.31.196.0/24", "AS112-v4", "True"},
	{"192.52.193.0/24", "AMT", "True"},
	{"192.88.99.0/24", "deprecated 6to4 relay anycast", "N/A"},
	{"192.88.99.2/32", "6a44-relay anycast", "False"},
	{"192.168.0.0/16", "private-use", "False"},
	{"192.175.48.0/24", "direct delegation AS112 service", "True"},
	{"198.18.0.0/15", "benchmarking", "False"},
	{"198.51.100.0/24", "documentation TEST-NET-2", "False"},
	{"203.0.113.0/24", "documentation TEST-NET-3", "False"},
	{"240.0.0.0/4", "reserved", "False"},
	{"255.255.255.255/32", "limited broadcast", "False"},
	{"224.0.0.0/4", "multicast (IANA multicast registry, not unicast)", "-"},

	{"::/128", "unspecified", "False"},
	{"::1/128", "loopback", "False"},
	{"64:ff9b:1::/48", "IPv4-IPv6 translation, local use", "False"},
	{"100::/64", "discard-only", "False"},
	{"100:0:0:1::/64", "dummy IPv6 prefix", "False"},
	{"2001::/23", "IETF protocol assignments", "False"},
	{"2001::/32", "Teredo", "N/A"},
	{"2001:1::1/128", "PCP anycast", "True"},
	{"2001:1::2/128", "TURN anycast", "True"},
	{"2001:1::3/128", "DNS-SD SRP anycast", "True"},
	{"2001:2::/48", "benchmarking", "False"},
	{"2001:3::/32", "AMT", "True"},
	{"2001:4:112::/48", "AS112-v6", "True"},
	{"2001:10::/28", "deprecated ORCHID", "N/A"},
	{"2001:20::/28", "ORCHIDv2", "True"},
	{"2001:30::/28", "DRIP DETs", "True"},
	{"2001:db8::/32", "documentation", "False"},
	{"2002::/16", "6to4", "N/A"},
	{"2620:4f:8000::/48", "direct delegation AS112 service", "True"},
	{"3fff::/20", "documentation", "False"},
	{"5f00::/16", "segment routing (SRv6) SIDs", "False"},
	{"fc00::/7", "unique-local", "False"},
	{"fe80::/10", "link-local unicast", "False"},
	{"ff00::/8", "multicast (not unicast)", "-"},
}

// publicControls must stay reachable: public resolvers, and the public
// addresses right next to the refused blocks (an off-by-one prefix shows).
var publicControls = []string{
	"8.8.8.8", "1.1.1.1", "9.9.9.9", "2606:4700:4700::1111", "2001:4860:4860::8888",
	"9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
	"169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "191.255.255.255", "192.0.1.0",
	"192.0.3.0", "192.31.195.255", "192.31.197.0", "192.52.192.255", "192.52.194.0", "192.88.98.255",
	"192.88.100.0", "192.167.255.255", "192.169.0.0", "192.175.47.255", "192.175.49.0", "198.17.255.255",
	"198.20.0.0", "198.51.99.255", "198.51.101.0", "203.0.112.255", "203.0.114.0", "223.255.255.255",
	"2000::1", "2001:200::", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::", "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"2003::", "2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", "2620:4f:8001::", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	"3fff:1000::", "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
}

// TestSpecialPurposeAddressesRefused checks the first, a middle and the
// last address of every special-purpose block, and for IPv4 the same
// address in every IPv6 form that embeds it.
func TestSpecialPurposeAddressesRefused(t *testing.T) {
	for _, b := range specialPurpose {
		t.Run(b.block, func(t *testing.T) {
			p := netip.MustParsePrefix(b.block)
			for _, a := range []netip.Addr{p.Addr(), middle(p), last(p)} {
				if publicAddr(a) {
					t.Errorf("%s (%s, globally reachable %s) is allowed, want refused", a, b.name, b.global)
				}
				if a.Is4() {
					checkEmbedded(t, a, false)
				}
			}
		})
	}
}

func TestPublicAddressesAllowed(t *testing.T) {
	for _, s := range publicControls {
		t.Run(s, func(t *testing.T) {
			a := netip.MustParseAddr(s)
			if !publicAddr(a) {
				t.Errorf("%s is refused, want allowed", a)
			}
			if a.Is4() {
				checkEmbedded(t, a, true)
			}
		})
	}
}

// checkEmbedded: IPv4-mapped and NAT64 (64:ff9b::/96) forms are judged as
// the IPv4 address they carry; 6to4, Teredo and IPv4-compatible forms are
// refused whatever they carry.
func checkEmbedded(t *testing.T, v4 netip.Addr, want bool) {
	t.Helper()
	b := v4.As4()
	var nat64, sixToFour, teredo, compat [16]byte
	nat64 = [16]byte{0x00, 0x64, 0xff, 0x9b, 12: b[0], b[1], b[2], b[3]}
	sixToFour = [16]byte{0x20, 0x02, b[0], b[1], b[2], b[3], 15: 1}
	// Teredo: server 65.54.227.120 in bytes 4-7, the client's address
	// XOR 0xff in the last four.
	teredo = [16]byte{0x20, 0x01, 0, 0, 65, 54, 227, 120, 0x80, 0, 0x63, 0xbf, ^b[0], ^b[1], ^b[2], ^b[3]}
	compat = [16]byte{12: b[0], b[1], b[2], b[3]}
	for _, c := range []struct {
		form string
		addr netip.Addr
		want bool
	}{
		{"IPv4-mapped", netip.AddrFrom16(v4.As16()), want},
		{"NAT64 64:ff9b::/96", netip.AddrFrom16(nat64), want},
		{"6to4 2002::/16", netip.AddrFrom16(sixToFour), false},
		{"Teredo client", netip.AddrFrom16(teredo), false},
		{"IPv4-compatible ::/96", netip.AddrFrom16(compat), false},
	} {
		if got := publicAddr(c.addr); got != c.want {
			t.Errorf("%s %s (carrying %s): allowed = %v, want %v", c.form, c.addr, v4, got, c.want)
		}
	}
}

func TestEmbeddedIPv4Forms(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"64:ff9b::7f00:1", false},                      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false},                   // NAT64 of 169.254.169.254 (cloud metadata)
		{"64:ff9b::a00:1", false},                       // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", true},                      // NAT64 of 8.8.8.8: how an IPv6-only subnet with DNS64 reaches it
		{"64:ff9b:1::7f00:1", false},                    // local-use NAT64: refused whatever it carries
		{"64:ff9b:1:808:8:800::", false},                // local-use NAT64 /48 form of 8.8.8.8
		{"::127.0.0.1", false},                          // IPv4-compatible (deprecated)
		{"::8.8.8.8", false},                            // IPv4-compatible, public inside: still refused
		{"::ffff:127.0.0.1", false},                     // IPv4-mapped
		{"::ffff:169.254.169.254", false},               // IPv4-mapped metadata endpoint
		{"::ffff:8.8.8.8", true},                        // IPv4-mapped public: dialled as 8.8.8.8
		{"2002:7f00:1::", false},                        // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::1", false},                    // 6to4 of 169.254.169.254
		{"2002:808:808::1", false},                      // 6to4 of 8.8.8.8: 6to4 is refused outright
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", false}, // Teredo, client 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", false}, // Teredo, client 8.8.8.8: refused outright
		{"fe80::1%eth0", false},                         // zoned link-local
		{"2606:4700:4700::1111%eth0", true},             // a zone does not hide the address
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := publicAddr(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Errorf("publicAddr(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

// middle is the block's first address with the first host bit set (the
// first address itself for a single-address block).
func middle(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	if host := len(b)*8 - p.Bits(); host > 0 {
		bit := p.Bits()
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// last is the block's last address (all host bits set).
func last(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// TestIsRefused: the guard's refusal is told apart from a network failure
// (origin delivery retries the one and not the other).
func TestIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	closed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	closed.Close() // nothing listens there any more: connection refused
	for _, tc := range []struct {
		name         string
		allowPrivate bool
		url          string
		wantErr      bool
		wantRefused  bool
	}{
		{"loopback, guarded", false, srv.URL, true, true},
		{"loopback, private allowed", true, srv.URL, false, false},
		{"nothing listening, private allowed", true, closed.URL, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &http.Client{Transport: GuardedTransport(tc.allowPrivate), Timeout: 5 * time.Second}
			resp, err := c.Get(tc.url)
			if resp != nil {
				resp.Body.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if got := IsRefused(err); got != tc.wantRefused {
				t.Errorf("IsRefused(%v) = %v, want %v", err, got, tc.wantRefused)
			}
		})
	}
}
