package httptool

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// GuardedTransport dials public addresses only (unless allowPrivate). The
// check runs on the address actually dialled, after DNS resolution, so a
// name that resolves (or re-resolves) to a private address is refused
// too. No proxy from the environment, also with allowPrivate: a proxy
// would dial for us, past the check, to wherever the tenant asks.
// Uploaded tools and origin deliveries (shared/turn/origin) run on it.
func GuardedTransport(allowPrivate bool) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &refusedError{address: address, reason: "not an IP address and port"}
			}
			if reason := refusal(ap.Addr()); reason != "" {
				return &refusedError{address: ap.Addr().String(), reason: reason}
			}
			return nil
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return t
}

// refusedError is the guard's refusal of one dialled address. It names
// the address and the rule: it is for the operator's log only (a tenant
// must not learn what an internal name resolves to).
type refusedError struct {
	address, reason string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("address %s refused: %s", e.address, e.reason)
}

// IsRefused reports whether err (from a request on GuardedTransport) is
// the guard's refusal of the address dialled: a permanent answer, not a
// network failure worth a retry.
func IsRefused(err error) bool {
	var refused *refusedError
	return errors.As(err, &refused)
}

// block is one refused address block and what it is.
type block struct {
	prefix netip.Prefix
	name   string
}

func blocks(pairs ...string) []block {
	out := make([]block, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, block{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// refusedV4 is every block of the IANA IPv4 Special-Purpose Address
// Registry (RFC 6890 and its updates), the ones it marks globally
// reachable included, plus multicast. Blocks inside a listed block (the
// anycast addresses in 192.0.0.0/24, 192.88.99.2/32, 255.255.255.255/32)
// are covered by it.
var refusedV4 = blocks(
	"0.0.0.0/8", `"this network" (RFC 791)`,
	"10.0.0.0/8", "private-use (RFC 1918)",
	"100.64.0.0/10", "shared address space (RFC 6598)",
	"127.0.0.0/8", "loopback (RFC 1122)",
	"169.254.0.0/16", "link local, the cloud metadata endpoint (RFC 3927)",
	"172.16.0.0/12", "private-use (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignments (RFC 6890)",
	"192.0.2.0/24", "documentation (RFC 5737)",
	"192.31.196.0/24", "AS112-v4 (RFC 7535)",
	"192.52.193.0/24", "AMT (RFC 7450)",
	"192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)",
	"192.168.0.0/16", "private-use (RFC 1918)",
	"192.175.48.0/24", "AS112 direct delegation (RFC 7534)",
	"198.18.0.0/15", "benchmarking (RFC 2544)",
	"198.51.100.0/24", "documentation (RFC 5737)",
	"203.0.113.0/24", "documentation (RFC 5737)",
	"224.0.0.0/4", "multicast (RFC 5771)",
	"240.0.0.0/4", "reserved, limited broadcast (RFC 1112, RFC 919)",
)

// refusedV6 is every block of the IANA IPv6 Special-Purpose Address
// Registry, the ones it marks globally reachable included, except
// ::ffff:0:0/96 (IPv4-mapped: judged as the IPv4 address) and
// 64:ff9b::/96 (NAT64: judged by the IPv4 address it embeds). Blocks inside
// 2001::/23 (Teredo 2001::/32, the anycast addresses, benchmarking, AMT,
// AS112-v6, ORCHID, ORCHIDv2, DRIP) are covered by it. Addresses outside
// 2000::/3 are refused apart from this list (see refusal).
var refusedV6 = blocks(
	"::/128", "unspecified (RFC 4291)",
	"::1/128", "loopback (RFC 4291)",
	"64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)",
	"100::/64", "discard-only (RFC 6666)",
	"100:0:0:1::/64", "dummy prefix (RFC 9780)",
	"2001::/23", "IETF protocol assignments, Teredo included (RFC 2928, RFC 4380)",
	"2001:db8::/32", "documentation (RFC 3849)",
	"2002::/16", "6to4 (RFC 3056)",
	"2620:4f:8000::/48", "AS112 direct delegation (RFC 7534)",
	"3fff::/20", "documentation (RFC 9637)",
	"5f00::/16", "SRv6 SIDs (RFC 9602)",
	"fc00::/7", "unique-local (RFC 4193)",
	"fe80::/10", "link-local unicast (RFC 4291)",
	"ff00::/8", "multicast (RFC 4291)",
)

var (
	// nat64 is the well-known NAT64 prefix (RFC 6052): the last 32 bits
	// are an IPv4 address a translator dials for us.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// globalUnicast6 is the only IPv6 space IANA allocates unicast from.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// publicAddr reports whether an uploaded tool may dial a.
func publicAddr(a netip.Addr) bool { return refusal(a) == "" }

// refusal says why the guard refuses a, or "" when a may be dialled.
func refusal(a netip.Addr) string {
	// A zone only picks the interface of a scoped address; Prefix.Contains
	// never matches a zoned address, so judge the address without it.
	a = a.WithZone("").Unmap() // IPv4-mapped: the kernel dials the IPv4 address
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.Is4():
		for _, b := range refusedV4 {
			if b.prefix.Contains(a) {
				return b.prefix.String() + " " + b.name
			}
		}
		return ""
	case nat64.Contains(a):
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if r := refusal(v4); r != "" {
			return fmt.Sprintf("NAT64 (64:ff9b::/96) of %s: %s", v4, r)
		}
		return ""
	}
	for _, b := range refusedV6 {
		if b.prefix.Contains(a) {
			return b.prefix.String() + " " + b.name
		}
	}
	if !globalUnicast6.Contains(a) {
		// ::/96 IPv4-compatible (deprecated), fec0::/10 site-local and
		// unassigned space.
		return "outside 2000::/3, the IPv6 global unicast space"
	}
	return ""
}
