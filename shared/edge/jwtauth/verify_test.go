package jwtauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// unsignedToken builds "header.payload." as an alg:none token would be.
func unsignedToken(t testing.TB, alg string, claims map[string]any) string {
	return b64(`{"alg":"`+alg+`","typ":"JWT"}`) + "." + b64(jsonOf(t, claims)) + "."
}

// hsWithPublicKey is the key-confusion attack: HS256 keyed with the PEM of
// the issuer's RSA public key.
func hsWithPublicKey(t testing.TB, claims map[string]any) string {
	der, err := x509.MarshalPKIXPublicKey(rsaKey1.priv.Public())
	must(t, err)
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	input := b64(`{"alg":"HS256","typ":"JWT","kid":"rsa-1"}`) + "." + b64(jsonOf(t, claims))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func with(c map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// deleted marks a claim to drop in with.
var deleted any = nil

func TestVerify(t *testing.T) {
	keys(t)
	good := claimsAt(epoch)
	pub := func(ks ...testKey) []jose.JSONWebKey {
		var out []jose.JSONWebKey
		for _, k := range ks {
			out = append(out, k.jwk())
		}
		return out
	}
	rsaNoAlg := rsaKey1.jwk()
	rsaNoAlg.Algorithm = ""

	tests := []struct {
		name   string
		keys   []jose.JSONWebKey
		cfg    func(*Config)
		token  func(t *testing.T) string
		reason string // "" means accepted
	}{
		{name: "rsa ok", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", good) }},
		{name: "ec ok", token: func(t *testing.T) string { return sign(t, ecKey, "ec-1", good) }},
		{name: "eddsa ok", token: func(t *testing.T) string { return sign(t, edKey, "ed-1", good) }},
		{name: "no kid tries every key", token: func(t *testing.T) string { return sign(t, ecKey, "", good) }},
		{name: "aud list containing ours", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{"other", testAudience}))
		}},
		{name: "fractional exp", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "exp", float64(epoch.Unix())+0.5))
		}},

		{name: "empty", token: func(*testing.T) string { return "" }, reason: ReasonMissingToken},
		{name: "blank", token: func(*testing.T) string { return "  \t" }, reason: ReasonMissingToken},

		{name: "one part", token: func(*testing.T) string { return "abc" }, reason: ReasonMalformed},
		{name: "two parts", token: func(*testing.T) string { return "abc.def" }, reason: ReasonMalformed},
		{name: "four parts", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", good) + ".x" }, reason: ReasonMalformed},
		{name: "header not base64", token: func(*testing.T) string { return "!!!.e30.sig" }, reason: ReasonMalformed},
		{name: "header not json", token: func(*testing.T) string { return b64("nope") + ".e30.c2ln" }, reason: ReasonMalformed},
		{name: "signature not base64", token: func(t *testing.T) string {
			tok := sign(t, rsaKey1, "rsa-1", good)
			return tok[:strings.LastIndex(tok, ".")+1] + "***"
		}, reason: ReasonMalformed},
		{name: "json serialization refused", token: func(*testing.T) string { return `{"payload":"e30","signatures":[]}` }, reason: ReasonMalformed},
		// Correctly signed and otherwise valid: only the size refuses it.
		{name: "largest token that fits", token: func(t *testing.T) string { fits, _ := aroundTheLimit(t, good); return fits }},
		{name: "too long", token: func(t *testing.T) string { _, over := aroundTheLimit(t, good); return over }, reason: ReasonMalformed},
		{name: "far too long", token: func(t *testing.T) string {
			return sign(t, ecKey, "ec-1", with(good, "pad", strings.Repeat("x", 2*maxTokenBytes)))
		}, reason: ReasonMalformed},
		{name: "no exp", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", with(good, "exp", deleted)) }, reason: ReasonMalformed},
		{name: "exp as string", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "exp", "2099-01-01"))
		}, reason: ReasonMalformed},
		{name: "nbf as bool", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", with(good, "nbf", true)) }, reason: ReasonMalformed},

		{name: "signed by an unpublished key with a published kid", token: func(t *testing.T) string {
			return sign(t, rogueRSA, "rsa-1", good)
		}, reason: ReasonBadSignature},
		{name: "payload swapped", token: func(t *testing.T) string {
			a := strings.Split(sign(t, rsaKey1, "rsa-1", good), ".")
			b := strings.Split(sign(t, rsaKey1, "rsa-1", with(good, "sub", "root")), ".")
			return a[0] + "." + b[1] + "." + a[2]
		}, reason: ReasonBadSignature},
		{name: "no kid, no key verifies", token: func(t *testing.T) string { return sign(t, rogueRSA, "", good) }, reason: ReasonBadSignature},

		{name: "unknown kid", token: func(t *testing.T) string { return sign(t, rsaKey1, "who", good) }, reason: ReasonUnknownKey},
		{name: "no kid, no key of that type", keys: pub(rsaKey1), token: func(t *testing.T) string {
			return sign(t, ecKey, "", good)
		}, reason: ReasonUnknownKey},

		{name: "alg none", token: func(t *testing.T) string { return unsignedToken(t, "none", good) }, reason: ReasonWrongAlgorithm},
		{name: "alg None", token: func(t *testing.T) string { return unsignedToken(t, "None", good) }, reason: ReasonWrongAlgorithm},
		{name: "alg none with kid and signature", token: func(t *testing.T) string {
			return b64(`{"alg":"none","kid":"rsa-1"}`) + "." + b64(jsonOf(t, good)) + ".c2ln"
		}, reason: ReasonWrongAlgorithm},
		{name: "HS256 keyed with the public key", token: func(t *testing.T) string { return hsWithPublicKey(t, good) }, reason: ReasonWrongAlgorithm},
		{name: "alg off the allow list", token: func(t *testing.T) string {
			return sign(t, testKey{"rsa-1", jose.RS384, rsaKey1.priv}, "rsa-1", good)
		}, reason: ReasonWrongAlgorithm},
		{name: "header alg differs from the key's alg", cfg: func(c *Config) { c.Algorithms = []string{"RS256", "PS256"} },
			token: func(t *testing.T) string {
				return sign(t, testKey{"rsa-1", jose.PS256, rsaKey1.priv}, "rsa-1", good)
			}, reason: ReasonWrongAlgorithm},
		{name: "EC alg against an RSA key without alg", keys: []jose.JSONWebKey{rsaNoAlg},
			token: func(t *testing.T) string { return sign(t, ecKey, "rsa-1", good) }, reason: ReasonWrongAlgorithm},
		{name: "RSA key without alg still verifies RS256", keys: []jose.JSONWebKey{rsaNoAlg},
			token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", good) }},

		{name: "expired", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "exp", epoch.Add(-2*time.Minute).Unix()))
		}, reason: ReasonExpired},
		{name: "nbf in the future", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "nbf", epoch.Add(2*time.Minute).Unix()))
		}, reason: ReasonNotYetValid},
		{name: "iat in the future", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "iat", epoch.Add(2*time.Minute).Unix()))
		}, reason: ReasonNotYetValid},

		{name: "other issuer", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "iss", "https://evil.example/"))
		}, reason: ReasonWrongIssuer},
		{name: "issuer with trailing difference", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "iss", strings.TrimSuffix(testIssuer, "/")))
		}, reason: ReasonWrongIssuer},
		{name: "no issuer", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", with(good, "iss", deleted)) }, reason: ReasonWrongIssuer},
		{name: "issuer not a string", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", with(good, "iss", 7)) }, reason: ReasonWrongIssuer},

		{name: "other audience", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", "someone-else"))
		}, reason: ReasonWrongAudience},
		{name: "aud list without ours", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{"a", "b"}))
		}, reason: ReasonWrongAudience},
		{name: "aud empty list", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{}))
		}, reason: ReasonWrongAudience},
		{name: "aud list of non-strings", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []any{1, true}))
		}, reason: ReasonWrongAudience},
		// Near misses: the audience must match exactly, never by prefix,
		// suffix, case or in a list element that merely resembles it.
		{name: "aud with a suffix", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", testAudience+"-x"))
		}, reason: ReasonWrongAudience},
		{name: "aud a prefix of ours", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", strings.TrimSuffix(testAudience, "s")))
		}, reason: ReasonWrongAudience},
		{name: "aud in another case", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", strings.ToUpper(testAudience)))
		}, reason: ReasonWrongAudience},
		{name: "aud with spaces", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", " "+testAudience+" "))
		}, reason: ReasonWrongAudience},
		{name: "aud list of one near miss", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{testAudience + "-x"}))
		}, reason: ReasonWrongAudience},
		{name: "aud list with a prefix of ours", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{"x", strings.TrimSuffix(testAudience, "s")}))
		}, reason: ReasonWrongAudience},
		{name: "aud list holding ours as one joined string", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []string{"x " + testAudience}))
		}, reason: ReasonWrongAudience},
		{name: "aud nested list", token: func(t *testing.T) string {
			return sign(t, rsaKey1, "rsa-1", with(good, "aud", []any{[]string{testAudience}}))
		}, reason: ReasonWrongAudience},
		{name: "no audience", token: func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", with(good, "aud", deleted)) }, reason: ReasonWrongAudience},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := tt.keys
			if ks == nil {
				ks = pub(rsaKey1, ecKey, edKey)
			}
			srv := newJWKSServer(t, ks...)
			cfgs := []func(*Config){}
			if tt.cfg != nil {
				cfgs = append(cfgs, tt.cfg)
			}
			v := newTestVerifier(t, srv, &clock{t: epoch}, cfgs...)
			raw := tt.token(t)
			claims, err := v.Verify(context.Background(), raw)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if claims.Subject() == "" {
					t.Fatalf("claims have no subject: %v", claims)
				}
				return
			}
			if claims != nil {
				t.Fatalf("claims returned with an error: %v", claims)
			}
			var e *Error
			if !errors.As(err, &e) || e.Reason != tt.reason {
				t.Fatalf("err = %v, want reason %s", err, tt.reason)
			}
			if len(raw) > 8 && strings.Contains(err.Error(), raw) {
				t.Fatalf("error text contains the token")
			}
			for _, part := range strings.Split(raw, ".") {
				if len(part) > 8 && strings.Contains(err.Error(), part) {
					t.Fatalf("error text contains part of the token: %q", err.Error())
				}
			}
		})
	}
}

// aroundTheLimit returns two ES256 tokens over claims plus a "pad" claim:
// the longest that fits maxTokenBytes and the shortest that does not.
func aroundTheLimit(t *testing.T, claims map[string]any) (fits, over string) {
	t.Helper()
	for pad := 3*maxTokenBytes/4 - 300; ; pad++ {
		tok := sign(t, ecKey, "ec-1", with(claims, "pad", strings.Repeat("x", pad)))
		if len(tok) > maxTokenBytes {
			if fits == "" {
				t.Fatal("the first padded token is already too long; start lower")
			}
			return fits, tok
		}
		fits = tok
	}
}

func TestVerifyNumbersAreJSONNumber(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	v := newTestVerifier(t, srv, &clock{t: epoch})
	c, err := v.Verify(context.Background(), sign(t, rsaKey1, "rsa-1", with(claimsAt(epoch), "n", 12345678901234567)))
	must(t, err)
	n, ok := c["n"].(json.Number)
	if !ok || n.String() != "12345678901234567" {
		t.Fatalf("n = %#v, want json.Number 12345678901234567", c["n"])
	}
}

func TestLeewayBoundaries(t *testing.T) {
	keys(t)
	const leeway = 30 * time.Second
	exp := epoch.Add(10 * time.Minute)
	nbf := epoch
	tok := sign(t, rsaKey1, "rsa-1", with(claimsAt(epoch), "exp", exp.Unix(), "nbf", nbf.Unix(), "iat", nbf.Unix()))
	tests := []struct {
		name   string
		now    time.Time
		leeway time.Duration
		reason string
	}{
		{"inside", epoch.Add(time.Minute), leeway, ""},
		{"at exp, within leeway", exp, leeway, ""},
		{"last second before exp+leeway", exp.Add(leeway - time.Second), leeway, ""},
		{"at exp+leeway", exp.Add(leeway), leeway, ReasonExpired},
		{"after exp+leeway", exp.Add(leeway + time.Second), leeway, ReasonExpired},
		{"at nbf-leeway", nbf.Add(-leeway), leeway, ""},
		{"just before nbf-leeway", nbf.Add(-leeway - time.Second), leeway, ReasonNotYetValid},
		{"default leeway is 60s: exp+59s", exp.Add(59 * time.Second), 0, ""},
		{"default leeway is 60s: exp+60s", exp.Add(60 * time.Second), 0, ReasonExpired},
		{"max leeway", exp.Add(MaxLeeway - time.Second), MaxLeeway, ""},
	}
	srv := newJWKSServer(t, rsaKey1.jwk())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newTestVerifier(t, srv, &clock{t: tt.now}, func(c *Config) { c.Leeway = tt.leeway })
			_, err := v.Verify(context.Background(), tok)
			if got := Reason(err); got != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tt.reason)
			}
		})
	}
}

func TestJWKSUnavailable(t *testing.T) {
	keys(t)
	tok := func(t *testing.T) string { return sign(t, rsaKey1, "rsa-1", claimsAt(epoch)) }
	tests := []struct {
		name  string
		setup func(*jwksServer)
	}{
		{"server error", func(s *jwksServer) { s.setBody(http.StatusInternalServerError, []byte("oops")) }},
		{"not json", func(s *jwksServer) { s.setBody(http.StatusOK, []byte("<html>")) }},
		{"no usable keys", func(s *jwksServer) { s.setBody(http.StatusOK, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)) }},
		{"too large", func(s *jwksServer) { s.setBody(http.StatusOK, []byte(strings.Repeat(" ", maxJWKSBytes+1))) }},
		{"server down", func(s *jwksServer) { s.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, rsaKey1.jwk())
			tt.setup(srv)
			clk := &clock{t: epoch}
			v := newTestVerifier(t, srv, clk)
			raw := tok(t)
			_, err := v.Verify(context.Background(), raw)
			if Reason(err) != ReasonJWKSUnavailable {
				t.Fatalf("err = %v, want jwks_unavailable", err)
			}
			if strings.Contains(err.Error(), raw) {
				t.Fatal("error text contains the token")
			}
			// A failing endpoint is not retried within the interval either.
			before := srv.requests.Load()
			for range 10 {
				_, _ = v.Verify(context.Background(), raw)
			}
			if got := srv.requests.Load(); got != before {
				t.Fatalf("JWKS fetched %d more times within the refetch interval", got-before)
			}
		})
	}
}

func TestJWKSRecoversAfterOutage(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	srv.setBody(http.StatusServiceUnavailable, nil)
	clk := &clock{t: epoch}
	v := newTestVerifier(t, srv, clk)
	raw := sign(t, rsaKey1, "rsa-1", claimsAt(epoch))
	if _, err := v.Verify(context.Background(), raw); Reason(err) != ReasonJWKSUnavailable {
		t.Fatalf("err = %v, want jwks_unavailable", err)
	}
	srv.setKeys(t, rsaKey1.jwk())
	clk.Advance(DefaultRefetchInterval)
	if _, err := v.Verify(context.Background(), raw); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestKeyRotation(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	clk := &clock{t: epoch}
	v := newTestVerifier(t, srv, clk)
	ctx := context.Background()

	verify := func(k testKey, kid string) error {
		_, err := v.Verify(ctx, sign(t, k, kid, claimsAt(clk.Now())))
		return err
	}
	wantRequests := func(n int64) {
		t.Helper()
		if got := srv.requests.Load(); got != n {
			t.Fatalf("JWKS requests = %d, want %d", got, n)
		}
	}

	wantRequests(0) // lazy: New does not fetch
	must(t, verify(rsaKey1, "rsa-1"))
	must(t, verify(rsaKey1, "rsa-1"))
	wantRequests(1) // cached

	// The issuer rotates: rsa-2 is published and starts signing.
	clk.Advance(5 * time.Minute)
	srv.setKeys(t, rsaKey1.jwk(), rsaKey2.jwk())
	must(t, verify(rsaKey2, "rsa-2"))
	wantRequests(2) // one refetch on the unknown kid
	must(t, verify(rsaKey2, "rsa-2"))
	must(t, verify(rsaKey1, "rsa-1"))
	wantRequests(2)

	// A flood of random kids within the interval costs nothing...
	for i := range 50 {
		if err := verify(rsaKey1, "bogus-"+string(rune('a'+i%26))); Reason(err) != ReasonUnknownKey {
			t.Fatalf("bogus kid: err = %v, want unknown_key", err)
		}
	}
	// ...including from the same fetch the rotation just made.
	wantRequests(2)

	// After the interval, at most one more fetch however many bogus kids.
	clk.Advance(DefaultRefetchInterval)
	for range 50 {
		_ = verify(rsaKey1, "bogus")
	}
	wantRequests(3)

	// The old key is withdrawn: once refetched it no longer verifies.
	srv.setKeys(t, rsaKey2.jwk())
	clk.Advance(DefaultCacheTTL)
	if err := verify(rsaKey1, "rsa-1"); Reason(err) != ReasonUnknownKey {
		t.Fatalf("withdrawn key: err = %v, want unknown_key", err)
	}
	must(t, verify(rsaKey2, "rsa-2"))
	wantRequests(4)
}

func TestUnknownKidFloodConcurrent(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	clk := &clock{t: epoch}
	v := newTestVerifier(t, srv, clk)
	tok := sign(t, rsaKey1, "not-published", claimsAt(epoch))
	done := make(chan error)
	for range 64 {
		go func() {
			_, err := v.Verify(context.Background(), tok)
			done <- err
		}()
	}
	for range 64 {
		if err := <-done; Reason(err) != ReasonUnknownKey {
			t.Fatalf("err = %v, want unknown_key", err)
		}
	}
	if got := srv.requests.Load(); got != 1 {
		t.Fatalf("JWKS requests = %d, want 1", got)
	}
}

func TestCancelledContextWhileFetching(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	v := newTestVerifier(t, srv, &clock{t: epoch})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := v.Verify(ctx, sign(t, rsaKey1, "rsa-1", claimsAt(epoch)))
	if Reason(err) != ReasonJWKSUnavailable {
		t.Fatalf("err = %v, want jwks_unavailable", err)
	}
}

func TestJWKSSkipsUnusableKeys(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t)
	good, err := json.Marshal(rsaKey1.jwk())
	must(t, err)
	enc, err := json.Marshal(jose.JSONWebKey{Key: ecKey.priv.Public(), KeyID: "ec-1", Algorithm: "ES256", Use: "enc"})
	must(t, err)
	body := `{"keys":[{"kty":"oct","kid":"rsa-1","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"},{"kty":"weird"},` + string(enc) + `,` + string(good) + `]}`
	srv.setBody(http.StatusOK, []byte(body))
	v := newTestVerifier(t, srv, &clock{t: epoch})
	if _, err := v.Verify(context.Background(), sign(t, rsaKey1, "rsa-1", claimsAt(epoch))); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := v.Verify(context.Background(), sign(t, ecKey, "ec-1", claimsAt(epoch))); Reason(err) != ReasonUnknownKey {
		t.Fatalf("encryption key used for signatures: err = %v", err)
	}
}

// A caller that gives up mid-fetch must not poison the cache for everyone
// else for a whole refetch interval.
func TestCallerCancellationDoesNotPoisonCache(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t, rsaKey1.jwk())
	srv.mu.Lock()
	srv.delay = 200 * time.Millisecond
	srv.mu.Unlock()
	v := newTestVerifier(t, srv, &clock{t: epoch})
	raw := sign(t, rsaKey1, "rsa-1", claimsAt(epoch))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _ = v.Verify(ctx, raw) // its deadline passes while the fetch runs
	if _, err := v.Verify(context.Background(), raw); err != nil {
		t.Fatalf("after a cancelled caller: %v", err)
	}
	if got := srv.requests.Load(); got != 1 {
		t.Fatalf("JWKS requests = %d, want 1", got)
	}
}
