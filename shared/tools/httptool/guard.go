package httptool

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// guardedTransport dials public addresses only (unless allowPrivate). The
// check runs on the address actually dialled, after DNS resolution, so a
// name that resolves (or re-resolves) to a private address is refused
// too. No proxy from the environment, also with allowPrivate: a proxy
// would dial for us, past the check, to wherever the tenant asks.
func guardedTransport(allowPrivate bool) *http.Transport {
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

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598, carrier-grade NAT).
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports whether an uploaded tool may dial a.
func publicAddr(a netip.Addr) bool { return refusal(a) == "" }

// refusal says why the guard refuses a, or "" when a may be dialled.
func refusal(a netip.Addr) string {
	a = a.Unmap()
	if a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() &&
		!a.IsLinkLocalUnicast() && !sharedAddressSpace.Contains(a) {
		return ""
	}
	return "not a public address (loopback, private, link-local, shared or not unicast)"
}
