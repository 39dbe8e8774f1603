package jwtauth

import (
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary strings to Verify. The JWKS publishes only
// keys whose private halves the seeds never use (rogueRSA signs with
// rsaKey1's kid), so any acceptance is a forgery. Verify must never panic,
// never accept, always answer with a known reason code, and never echo the
// token.
func FuzzVerify(f *testing.F) {
	keys(f)
	srv := newJWKSServer(f, rsaKey1.jwk(), ecKey.jwk(), edKey.jwk())
	v := newTestVerifier(f, srv, &clock{t: epoch})
	good := claimsAt(epoch)

	f.Add("")
	f.Add("a.b.c")
	f.Add("..")
	f.Add(sign(f, rogueRSA, "rsa-1", good))
	f.Add(sign(f, rogueRSA, "", good))
	f.Add(sign(f, rogueRSA, "ec-1", good))
	f.Add(unsignedToken(f, "none", good))
	f.Add(unsignedToken(f, "RS256", good))
	f.Add(hsWithPublicKey(f, good))
	f.Add(b64(`{"alg":"RS256","kid":"rsa-1","crit":["exp"]}`) + "." + b64(`{}`) + ".AAAA")
	f.Add(b64(`{"alg":"ES256","kid":"ec-1"}`) + "." + b64(jsonOf(f, good)) + "." + strings.Repeat("A", 86))
	f.Add(b64(`{"alg":"EdDSA","kid":"ed-1"}`) + "." + b64(jsonOf(f, good)) + "." + strings.Repeat("A", 86))
	f.Add(`{"payload":"e30","signatures":[{"protected":"e30","signature":""}]}`)

	known := map[string]bool{
		ReasonMissingToken: true, ReasonMalformed: true, ReasonBadSignature: true,
		ReasonUnknownKey: true, ReasonWrongAlgorithm: true, ReasonExpired: true,
		ReasonNotYetValid: true, ReasonWrongIssuer: true, ReasonWrongAudience: true,
		ReasonJWKSUnavailable: true,
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		claims, err := v.Verify(ctx, raw)
		if err == nil || claims != nil {
			t.Fatalf("accepted %q: %v", raw, claims)
		}
		if !known[Reason(err)] {
			t.Fatalf("unknown reason in %v", err)
		}
		if len(raw) >= 24 && strings.Contains(err.Error(), raw) {
			t.Fatal("error text contains the token")
		}
	})
}
