package oauth_test

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
)

// The console's two routes: /console/auth/login starts a sign-in and keeps
// the pending value in a short-lived cookie; the callback finishes it.
func ExampleSignIn() {
	signIn, err := oauth.NewSignIn(oauth.SignInConfig{
		Issuer:       "http://127.0.0.1:9090",
		ClientID:     "agentauth-console",
		ClientSecret: domain.NewSecret("console-secret"),
		RedirectURL:  "http://127.0.0.1:8080/console/auth/callback",
		Keys:         [][]byte{[]byte("a key of at least thirty-two bytes...")},
	})
	if err != nil {
		panic(err)
	}
	const cookie = "agentauth_console_signin"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/auth/login", func(w http.ResponseWriter, r *http.Request) {
		authURL, pending, err := signIn.Begin(r.Context(), r.URL.Query().Get("returnTo"))
		if err != nil {
			http.Error(w, "sign-in unavailable", http.StatusBadGateway)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookie, Value: pending, Path: "/console/auth/",
			MaxAge: 600, HttpOnly: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, authURL, http.StatusFound)
	})
	mux.HandleFunc("GET /console/auth/callback", func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie(cookie)
		pending := ""
		if c != nil {
			pending = c.Value
		}
		// One use: the pending value goes whatever the outcome.
		http.SetCookie(w, &http.Cookie{Name: cookie, Path: "/console/auth/", MaxAge: -1, HttpOnly: true})
		signedIn, err := signIn.Finish(r.Context(), r.URL.Query(), pending)
		var refused *oauth.SignInError
		if errors.As(err, &refused) {
			http.Error(w, refused.Detail, http.StatusForbidden) // Detail is safe to show
			return
		}
		_ = signedIn.Claims["agentauth_roles"] // the console decides who may enter
		_ = time.Until(signedIn.Expiry)        // a session no longer than the ID token
		http.Redirect(w, r, signedIn.ReturnTo, http.StatusFound)
	})
	_ = http.ListenAndServe("127.0.0.1:8080", mux)
}
