package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"

	"golang.org/x/oauth2"
)

var (
	// errGrantRevoked: the provider rejected the refresh token
	// (invalid_grant) and the grant was revoked locally.
	errGrantRevoked = errors.New("grant revoked")
	// errProvider marks a failure reported by or talking to the provider.
	errProvider = errors.New("provider error")
)

var oauthErrorCode = regexp.MustCompile(`^[a-z0-9_.:-]{1,64}$`)

// safeReason describes err without anything a provider or a token could
// have put into it: x/oauth2's RetrieveError.Error() quotes the response
// body, which we never repeat.
func safeReason(err error) string {
	var re *oauth2.RetrieveError
	var ne net.Error
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
	case errors.Is(err, context.DeadlineExceeded):
		return "provider did not answer in time"
	case errors.As(err, &ne):
		return "provider unreachable"
	case errors.Is(err, errGrantRevoked):
		return "refresh token rejected; grant revoked"
	}
	return "internal error"
}

// providerCode is the RFC 6749 error code of err, or "".
func providerCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && oauthErrorCode.MatchString(re.ErrorCode) {
		return re.ErrorCode
	}
	return ""
}
