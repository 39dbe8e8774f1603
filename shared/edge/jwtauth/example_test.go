package jwtauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
)

// Wiring: one Verifier shared by every request (shared/app builds it from
// shared/config), the reason code (never the error text) in the 401 body.
func ExampleNew() {
	v, err := jwtauth.New(jwtauth.Config{
		JWKSURL:  "https://idp.example.test/.well-known/jwks.json",
		Issuer:   "https://idp.example.test/",
		Audience: "agentauth-tools",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	_ = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := jwtauth.BearerToken(r)
		if err == nil {
			var claims jwtauth.Claims
			claims, err = v.Verify(r.Context(), raw)
			if err == nil {
				fmt.Fprintln(w, "hello", claims.Subject())
				return
			}
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"unauthorized","reason":%q}`+"\n", jwtauth.Reason(err))
	})
}

func ExampleBearerToken() {
	r := httptest.NewRequest("GET", "/tools", nil)
	_, err := jwtauth.BearerToken(r)
	fmt.Println(jwtauth.Reason(err))

	r.Header.Set("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
	raw, _ := jwtauth.BearerToken(r)
	fmt.Println(raw)
	// Output:
	// missing_token
	// eyJhbGciOiJSUzI1NiJ9.e30.c2ln
}
