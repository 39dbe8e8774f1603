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
// too. No proxy from the environment: a proxy would dial for us.
func guardedTransport(allowPrivate bool) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("upstream address %q refused: %w", address, err)
			}
			if !publicAddr(ap.Addr()) {
				return fmt.Errorf("upstream address %s is not public: uploaded tools may only reach public addresses", ap.Addr())
			}
			return nil
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return t
}

// sharedAddressSpace is 100.64.0.0/10 (RFC 6598, carrier-grade NAT).
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports whether a is a globally routable unicast address.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() &&
		!a.IsLinkLocalUnicast() && !sharedAddressSpace.Contains(a)
}
