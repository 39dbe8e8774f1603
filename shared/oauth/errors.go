package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"syscall"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

var (
	// errGrantRevoked: the provider rejected the refresh token
	// (invalid_grant) and the grant was revoked locally.
	errGrantRevoked = errors.New("grant revoked")
	// errProvider marks a failure reported by or talking to the provider.
	// Every call to a provider wraps its error with it: only marked errors
	// are described as the provider's, so an operator looks at the right
	// system.
	errProvider = errors.New("provider error")
)

// atProvider marks err as the failure of a call to the provider.
func atProvider(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", errProvider, what, err)
}

var oauthErrorCode = regexp.MustCompile(`^[a-z0-9_.:-]{1,64}$`)

// safeReason describes err without anything a provider or a token could
// have put into it: x/oauth2's RetrieveError.Error() quotes the response
// body, which we never repeat, and paths and host names stay in the log.
func safeReason(err error) string {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		code := "unknown_error"
		if oauthErrorCode.MatchString(re.ErrorCode) {
			code = re.ErrorCode
		}
		if re.Response != nil {
			return fmt.Sprintf("provider answered %s (HTTP %d)", code, re.Response.StatusCode)
		}
		return "provider answered " + code
	case errors.Is(err, errGrantRevoked):
		return "refresh token rejected; grant revoked"
	}
	provider := errors.Is(err, errProvider)
	network := fromNetwork(err)
	switch {
	case provider && errors.Is(err, context.DeadlineExceeded):
		return "provider did not answer in time"
	case provider && network:
		return "provider unreachable"
	case provider:
		return "provider response unusable"
	case network:
		// A transport error of the store or the key service (DynamoDB,
		// KMS): not the provider's.
		return "store or key service unreachable"
	}
	if errno, ok := localIO(err); ok {
		return "local storage failed (" + errno.Error() + ")"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out inside agentauth (waiting for the store or another refresher)"
	}
	return "internal error"
}

// fromNetwork reports whether err came out of a network transport. The
// HTTP client wraps every failure in *url.Error; dialers and resolvers use
// *net.OpError and *net.DNSError. These may wrap a syscall.Errno
// (ECONNREFUSED), which is why localIO must not be asked first: an Errno
// alone satisfies net.Error and says nothing about where it came from.
func fromNetwork(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de)
}

// localIO returns the errno of a failed system call outside any network
// transport: the store's or the key files' ENOSPC, EROFS, EACCES, EIO…
// (wrapped in *fs.PathError, *os.LinkError or *os.SyscallError).
func localIO(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	ok := errors.As(err, &errno) && !fromNetwork(err)
	return errno, ok
}

// registeredCodes are the RFC 6749 error codes a token endpoint answers
// with (§5.2, and §4.1.2.1's server_error and temporarily_unavailable,
// which providers send there too).
var registeredCodes = []string{
	"invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
	"unsupported_grant_type", "invalid_scope", "server_error", "temporarily_unavailable",
}

// refreshFailureCode is the reason code a failed refresh leaves on its
// grant (domain.Grant.LastRefreshError). It is stored and shown to
// operators, so it comes from a fixed vocabulary: a registered RFC 6749
// code, "http_<status>" for an answer without one, or a
// domain.RefreshFailed… constant — never text the provider chose, which
// could quote a token.
func refreshFailureCode(err error) string {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		if slices.Contains(registeredCodes, re.ErrorCode) {
			return re.ErrorCode
		}
		if re.Response != nil {
			return fmt.Sprintf("http_%d", re.Response.StatusCode)
		}
		return domain.RefreshFailedUnusable
	case errors.Is(err, context.DeadlineExceeded):
		return domain.RefreshFailedTimeout
	case fromNetwork(err):
		return domain.RefreshFailedUnreachable
	}
	return domain.RefreshFailedUnusable
}

// providerCode is the RFC 6749 error code of err, or "".
func providerCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && oauthErrorCode.MatchString(re.ErrorCode) {
		return re.ErrorCode
	}
	return ""
}
