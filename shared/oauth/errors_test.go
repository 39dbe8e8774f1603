package oauth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// TestSafeReasonTellsLocalFromNetwork: syscall.Errno satisfies net.Error,
// so a full disk once read "provider unreachable". The transport wraps its
// errnos in *url.Error / *net.OpError; the store and sealer in
// *fs.PathError, *os.LinkError or *os.SyscallError.
func TestSafeReasonTellsLocalFromNetwork(t *testing.T) {
	transport := func(errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "https://idp.example/token", Err: &net.OpError{
			Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}}
	}
	path := func(op string, errno syscall.Errno) error {
		return &fs.PathError{Op: op, Path: "/home/u/.agentauth/oauth/grants/grant-1.enc.json", Err: errno}
	}
	for _, tc := range []struct {
		name     string
		err      error
		want     string // the reason must contain this
		mustNot  string // and must not contain this
		noDetail string // nor this (a path, a host)
	}{
		{"connection refused", fmt.Errorf("%w: refresh grant-1: %w", errProvider, transport(syscall.ECONNREFUSED)), "provider unreachable", "local", "idp.example"},
		{"connection reset", atProvider("refresh", transport(syscall.ECONNRESET)), "provider unreachable", "local", ""},
		{"DNS failure", atProvider("refresh", &url.Error{Op: "Post", URL: "https://idp.example/token", Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "idp.example", IsNotFound: true}}}), "provider unreachable", "local", "idp.example"},
		{"bare OpError", atProvider("refresh", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), "provider unreachable", "local", ""},
		{"transport timeout", atProvider("refresh", &url.Error{Op: "Post", URL: "https://idp.example/token", Err: context.DeadlineExceeded}), "provider did not answer in time", "local", ""},
		{"provider sent no access token", fmt.Errorf("%w: token response has no access_token", errProvider), "provider response unusable", "local", ""},
		// The store's and the key service's own transports (DynamoDB, KMS)
		// fail the same way, but not at the provider.
		{"store transport refused", fmt.Errorf("dynamostore: put grant: %w", transport(syscall.ECONNREFUSED)), "store or key service unreachable", "provider", "idp.example"},
		{"provider answered", &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, ErrorCode: "invalid_request"}, "provider answered invalid_request (HTTP 400)", "", ""},

		{"disk full on write", fmt.Errorf("store refreshed grant grant-1: filestore: put grant grant-1: %w", path("write", syscall.ENOSPC)), "local storage failed (no space left on device)", "provider", ".agentauth"},
		{"read-only file system", fmt.Errorf("acquire refresh lease: %w", path("open", syscall.EROFS)), "read-only file system", "provider", ".agentauth"},
		{"permission denied", path("open", syscall.EACCES), "local storage failed (permission denied)", "provider", ".agentauth"},
		{"I/O error", path("read", syscall.EIO), "local storage failed (input/output error)", "provider", ""},
		{"rename across", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: syscall.ENOSPC}, "no space left on device", "provider", ""},
		{"fsync", os.NewSyscallError("fsync", syscall.EIO), "local storage failed", "provider", ""},
		{"bare errno", fmt.Errorf("seal access token of grant-1: %w", syscall.ENOSPC), "local storage failed", "provider", ""},

		{"lease wait timed out", fmt.Errorf("wait for refresh lease: %w", context.DeadlineExceeded), "timed out", "provider", ""},
		{"anything else", errors.New("boom"), "internal error", "provider", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := safeReason(tc.err)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("safeReason = %q, want it to contain %q", got, tc.want)
			}
			if tc.mustNot != "" && strings.Contains(got, tc.mustNot) {
				t.Fatalf("safeReason = %q, must not contain %q", got, tc.mustNot)
			}
			if tc.noDetail != "" && strings.Contains(got, tc.noDetail) {
				t.Fatalf("safeReason = %q repeats %q", got, tc.noDetail)
			}
		})
	}
}

// faultyStore fails chosen writes the way a full or read-only disk does.
type faultyStore struct {
	domain.Store
	putGrant     error
	acquireLease error
}

func (f *faultyStore) PutGrant(ctx context.Context, g domain.Grant, expect int64) (domain.Grant, error) {
	if f.putGrant != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, f.putGrant)
	}
	return f.Store.PutGrant(ctx, g, expect)
}

func (f *faultyStore) AcquireLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if f.acquireLease != nil {
		return fmt.Errorf("filestore: lease %s: %w", key, f.acquireLease)
	}
	return f.Store.AcquireLease(ctx, key, owner, ttl)
}

func TestRefreshLocalFailureIsNotBlamedOnTheProvider(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*faultyStore)
		want  string
	}{
		{"provider down", func(*faultyStore) {}, "provider unreachable"},
		{"disk full storing the refreshed grant", func(f *faultyStore) {
			f.putGrant = &fs.PathError{Op: "write", Path: "grants/.tmp-1", Err: syscall.ENOSPC}
		}, "no space left on device"},
		{"read-only home taking the lease", func(f *faultyStore) {
			f.acquireLease = &fs.PathError{Op: "open", Path: "leases/x", Err: syscall.EROFS}
		}, "read-only file system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.consent("global", "team")
			f := &faultyStore{Store: h.store}
			tc.store(f)
			h.m = h.newManager(f)
			if tc.want == "provider unreachable" {
				h.p.srv.Close()
			}
			h.clock.Advance(time.Hour)
			res := h.request("global")
			if res.Status != StatusError || res.Error.Code != CodeRefreshFailed {
				t.Fatalf("got %+v", res)
			}
			if !strings.Contains(res.Error.Message, tc.want) {
				t.Fatalf("message %q, want it to name %q", res.Error.Message, tc.want)
			}
			local := f.putGrant != nil || f.acquireLease != nil
			if local && (strings.Contains(res.Error.Message, "provider") || !strings.Contains(res.Error.Message, "local storage failed")) {
				t.Fatalf("message %q blames the provider for a local failure", res.Error.Message)
			}
		})
	}
}
