package jwtauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
)

// Wiring in main: configuration from the environment, one Verifier shared
// by every request, the reason code (never the error text) in the 401 body.
func ExampleNew() {
	cfg, err := jwtauth.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	v, err := jwtauth.New(cfg)
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
