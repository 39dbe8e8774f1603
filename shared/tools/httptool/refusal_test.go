package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

const (
	firstToken  = "ya29.first-token-0123456789"
	secondToken = "ya29.second-token-0123456789"
)

// broker is a TokenSource whose grant holds firstToken and which answers
// an upstream's refusal with refused (the OAuth core's TokenRefused: a
// refreshed token, a consent, an error).
type broker struct {
	refused oauth.Result

	mu       sync.Mutex
	handedIn []string // the tokens given back as refused
}

func (b *broker) GetAccessToken(context.Context, oauth.TokenRequest) oauth.Result {
	return readyWith(firstToken)
}

func (b *broker) TokenRefused(_ context.Context, _ oauth.TokenRequest, refused domain.Secret) oauth.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handedIn = append(b.handedIn, refused.Reveal())
	return b.refused
}

func (b *broker) refusals() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.handedIn...)
}

func readyWith(tok string) oauth.Result {
	return oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(tok), TokenType: "Bearer"}
}

// seen is one request as the upstream got it.
type seen struct{ authorization, idempotencyKey, body string }

// recordingUpstream answers each request with answer(the request's
// Authorization header) and records what it got.
func recordingUpstream(t *testing.T, answer func(w http.ResponseWriter, authorization string)) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), string(b)})
		mu.Unlock()
		answer(w, r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

// refuse answers status with a WWW-Authenticate challenge (none when
// empty) and a body that echoes the token it refused.
func refuse(status int, challenge string) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, authorization string) {
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		w.WriteHeader(status)
		io.WriteString(w, "refused "+strings.TrimPrefix(authorization, "Bearer "))
	}
}

// TestUpstreamRefusalRunsTheCallOnceMore: an answer that refuses the
// broker's token (401, or a Bearer invalid_token challenge) hands the
// token back to the broker once, and the call runs once more with the
// token the broker answers with — with the same body and Idempotency-Key.
// The second answer is final, whatever it is: no loop. Any other answer
// is never retried and never asks the broker.
func TestUpstreamRefusalRunsTheCallOnceMore(t *testing.T) {
	okWithSecond := func(w http.ResponseWriter, authorization string) {
		if authorization != "Bearer "+secondToken {
			refuse(http.StatusUnauthorized, `Bearer error="invalid_token"`)(w, authorization)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}
	consent := oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-new", AuthorizationURL: "https://idp.example/authorize?x=1",
		SessionExpiresAt: time.Date(2026, 11, 21, 10, 10, 0, 0, time.UTC), Message: "Connect your demo account"}
	for _, tc := range []struct {
		name     string
		upstream func(http.ResponseWriter, string)
		refused  oauth.Result // the broker's answer to the refusal
		requests int          // upstream requests
		handedIn int          // tokens given back to the broker
		output   string       // the call's output, or
		code     string       // its tool error's code, or
		consent  bool         // an authorization_required result
	}{
		{"401, refreshed: the second run succeeds", okWithSecond, readyWith(secondToken), 2, 1, `{"ok":true}`, "", false},
		{"401 without a challenge, refreshed", func(w http.ResponseWriter, a string) {
			if a != "Bearer "+secondToken {
				refuse(http.StatusUnauthorized, "")(w, a)
				return
			}
			io.WriteString(w, `{"ok":true}`)
		}, readyWith(secondToken), 2, 1, `{"ok":true}`, "", false},
		{"403 with a Bearer invalid_token challenge", func(w http.ResponseWriter, a string) {
			if a != "Bearer "+secondToken {
				refuse(http.StatusForbidden, `Bearer realm="api", error="invalid_token", error_description="revoked, sorry"`)(w, a)
				return
			}
			io.WriteString(w, `{"ok":true}`)
		}, readyWith(secondToken), 2, 1, `{"ok":true}`, "", false},
		{"401 twice: one refresh, one more run, the refusal is the answer", refuse(http.StatusUnauthorized, `Bearer error="invalid_token"`), readyWith(secondToken), 2, 1, "", CodeUpstreamAuth, false},
		{"refresh refused (invalid_grant) or no refresh token: a new consent", refuse(http.StatusUnauthorized, ""), consent, 1, 1, "", "", true},
		{"refresh failed at the provider: the broker's error", refuse(http.StatusUnauthorized, ""), oauth.ErrorResult(oauth.CodeRefreshFailed, "provider unreachable"), 1, 1, "", CodeAuth, false},
		{"the broker has no newer token: the refusal is the answer", refuse(http.StatusUnauthorized, ""), readyWith(firstToken), 1, 1, "", CodeUpstreamAuth, false},
		{"403 insufficient_scope is not a refusal of the token", refuse(http.StatusForbidden, `Bearer error="insufficient_scope", scope="orders.write"`), readyWith(secondToken), 1, 0, "", CodeUpstreamAuth, false},
		{"403 without a challenge", refuse(http.StatusForbidden, ""), readyWith(secondToken), 1, 0, "", CodeUpstreamAuth, false},
		{"400 invalid_request", refuse(http.StatusBadRequest, `Bearer error="invalid_request"`), readyWith(secondToken), 1, 0, "", CodeUpstream, false},
		{"500", refuse(http.StatusInternalServerError, ""), readyWith(secondToken), 1, 0, "", CodeUpstream, false},
		{"502 with an invalid_token challenge", refuse(http.StatusBadGateway, `Bearer error="invalid_token"`), readyWith(secondToken), 1, 0, "", CodeUpstream, false},
		{"429", refuse(http.StatusTooManyRequests, ""), readyWith(secondToken), 1, 0, "", CodeUpstream, false},
		{"404", refuse(http.StatusNotFound, ""), readyWith(secondToken), 1, 0, "", CodeUpstream, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := recordingUpstream(t, tc.upstream)
			b := &broker{refused: tc.refused}
			call := Call{Auth: domain.TurnAuth{Subjects: &domain.Subjects{User: "demo:user:alice"}}, IdempotencyKey: "agentauth-turn-1-call-1"}
			out, err := New(Options{Tokens: b}).CallInvoker(tool(srv.URL, "POST", "/orders", true), call)(context.Background(), json.RawMessage(`{"item":"soup"}`))
			reqs := got()
			if len(reqs) != tc.requests {
				t.Fatalf("%d upstream requests, want %d: %+v", len(reqs), tc.requests, reqs)
			}
			if h := b.refusals(); len(h) != tc.handedIn || len(h) == 1 && h[0] != firstToken {
				t.Fatalf("tokens handed back as refused: %d, want %d (the one sent)", len(h), tc.handedIn)
			}
			for i, r := range reqs {
				want := firstToken
				if i == 1 {
					want = secondToken
				}
				if r.authorization != "Bearer "+want || r.idempotencyKey != call.IdempotencyKey || r.body != `{"item":"soup"}` {
					t.Fatalf("request %d: %+v, want the same call with token %d", i, r, i+1)
				}
			}
			var e *Error
			var ar *toolhooks.AuthorizationRequired
			switch {
			case tc.output != "":
				if err != nil || string(out) != tc.output {
					t.Fatalf("output %s, err %v, want %s", out, err, tc.output)
				}
			case tc.consent:
				if !errors.As(err, &ar) || !strings.Contains(string(ar.Authorization), `"authSessionId":"as-new"`) || !strings.Contains(string(ar.Authorization), "https://idp.example/authorize?x=1") {
					t.Fatalf("err %v, want authorization_required with the new session's link", err)
				}
			default:
				if !errors.As(err, &e) || e.Code != tc.code {
					t.Fatalf("output %s, err %#v, want %s", out, err, tc.code)
				}
				if strings.Contains(e.Message, firstToken) || strings.Contains(e.Message, secondToken) {
					t.Fatalf("the error holds a token: %s", e.Message)
				}
			}
		})
	}
}

// TestNoAnswerIsNeverRetried: a call that got no answer — the runner's
// timeout, the caller's limit, a connection refused — may have been
// carried out, so it never runs again and the broker is never asked to
// replace its token.
func TestNoAnswerIsNeverRetried(t *testing.T) {
	hold := func(t *testing.T) (string, func() int) {
		var mu sync.Mutex
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			mu.Unlock()
			_, _ = io.Copy(io.Discard, r.Body) // then a closed connection ends r's context
			<-r.Context().Done()               // no answer until the request is cancelled
		}))
		t.Cleanup(srv.Close)
		return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
	}
	t.Run("the runner's timeout", func(t *testing.T) {
		url, requests := hold(t)
		b := &broker{refused: readyWith(secondToken)}
		_, err := New(Options{Tokens: b, Timeout: 50 * time.Millisecond}).Invoker(tool(url, "POST", "/orders", true), domain.TurnAuth{}, false)(context.Background(), nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeTimeout || requests() != 1 || len(b.refusals()) != 0 {
			t.Fatalf("err %v, %d requests, %d refusals: want %s, one request, no refresh", err, requests(), len(b.refusals()), CodeTimeout)
		}
	})
	t.Run("the caller's limit", func(t *testing.T) {
		url, requests := hold(t)
		b := &broker{refused: readyWith(secondToken)}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := New(Options{Tokens: b}).CallInvoker(tool(url, "POST", "/orders", true), Call{CallerLimit: true})(ctx, nil)
		if err == nil || requests() != 1 || len(b.refusals()) != 0 {
			t.Fatalf("err %v, %d requests, %d refusals: want an error, one request, no refresh", err, requests(), len(b.refusals()))
		}
	})
	t.Run("a connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		b := &broker{refused: readyWith(secondToken)}
		_, err := New(Options{Tokens: b}).Invoker(tool(url, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeUnreachable || len(b.refusals()) != 0 {
			t.Fatalf("err %v, %d refusals: want %s and no refresh", err, len(b.refusals()), CodeUnreachable)
		}
	})
}

// TestRefusalWithoutBrokerToken: a tool without auth sends no broker
// token, so a 401 is the upstream's answer about credentials it never got
// from us: answered as it is, never run again.
func TestRefusalWithoutBrokerToken(t *testing.T) {
	srv, got := recordingUpstream(t, refuse(http.StatusUnauthorized, `Bearer error="invalid_token"`))
	b := &broker{refused: readyWith(secondToken)}
	_, err := New(Options{Tokens: b}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, false)(context.Background(), nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUpstreamAuth || len(got()) != 1 || len(b.refusals()) != 0 {
		t.Fatalf("err %v, %d requests, %d refusals: want %s, one request, no refresh", err, len(got()), len(b.refusals()), CodeUpstreamAuth)
	}
}

func TestInvalidTokenChallenge(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{[]string{`Bearer error="invalid_token"`}, true},
		{[]string{`bearer ERROR=invalid_token`}, true},
		{[]string{`Bearer realm="example", error="invalid_token", error_description="The access token expired"`}, true},
		{[]string{`Basic realm="x", Bearer error="invalid_token"`}, true},
		{[]string{`Basic realm="x"`, `Bearer realm="a, error=\"invalid_token\"", error="invalid_token"`}, true},
		{[]string{`Bearer error="insufficient_scope", scope="a b"`}, false},
		{[]string{`Bearer realm="error=invalid_token"`}, false},
		{[]string{`Bearer error_description="error=\"invalid_token\""`}, false},
		{[]string{`Basic error="invalid_token"`}, false},
		{[]string{`DPoP error="invalid_token"`}, false},
		{[]string{`Bearer error="invalid_token", Basic realm="x"`}, true},
		{[]string{`Basic realm="x", error="invalid_token"`}, false},
		{[]string{`Bearer`}, false},
		{[]string{``}, false},
		{nil, false},
	} {
		if got := invalidTokenChallenge(tc.values); got != tc.want {
			t.Errorf("invalidTokenChallenge(%q) = %v, want %v", tc.values, got, tc.want)
		}
	}
}

// FuzzInvalidTokenChallenge: any header value parses without a panic, and
// a value said to hold the challenge names a Bearer scheme and
// invalid_token.
func FuzzInvalidTokenChallenge(f *testing.F) {
	for _, s := range []string{`Bearer error="invalid_token"`, `Basic realm="x", Bearer error=invalid_token`, `Bearer realm="a\"b,c"`, `"`, `\`, `,,,`, `Bearer error=`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if invalidTokenChallenge([]string{v}) {
			low := strings.ToLower(v)
			if !strings.Contains(low, "bearer") || !strings.Contains(v, "invalid_token") {
				t.Fatalf("%q taken for a Bearer invalid_token challenge", v)
			}
		}
	})
}
