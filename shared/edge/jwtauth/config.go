package jwtauth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Defaults and limits applied by New.
const (
	DefaultLeeway          = 60 * time.Second
	MaxLeeway              = 5 * time.Minute
	DefaultRefetchInterval = 30 * time.Second
	DefaultCacheTTL        = time.Hour
	defaultFetchTimeout    = 10 * time.Second
)

// defaultAlgorithms is the allow list used when Config.Algorithms is empty:
// what the common identity providers sign with.
var defaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// DefaultAlgorithms returns the allow list used when Config.Algorithms is
// empty.
func DefaultAlgorithms() []string { return append([]string(nil), defaultAlgorithms...) }

// supportedAlgorithms are the only algorithms a Config may allow. All are
// asymmetric: "none" and HS* are refused by New, so a public key can never
// be used as an HMAC secret.
var supportedAlgorithms = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true,
	"PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true,
	"EdDSA": true,
}

// Config says which tokens a Verifier accepts.
type Config struct {
	// JWKSURL is where the issuer publishes its signing keys. It must be
	// https, or http on a loopback host (local development and tests).
	JWKSURL string
	// Issuer must equal the token's iss claim exactly.
	Issuer string
	// Audience must equal the token's aud claim, or one of its entries.
	Audience string
	// Algorithms is the allow list; empty means DefaultAlgorithms. Only
	// RS*, PS*, ES* and EdDSA may be listed.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp, nbf and iat; zero means
	// DefaultLeeway, and it may not be negative or exceed MaxLeeway.
	Leeway time.Duration
	// RefetchInterval is the least time between two JWKS fetches; zero
	// means DefaultRefetchInterval. It bounds the load an attacker can put
	// on the JWKS endpoint with tokens naming unknown key ids.
	RefetchInterval time.Duration
	// CacheTTL is how long a fetched key set is used before it is fetched
	// again, so removed keys stop being accepted; zero means DefaultCacheTTL.
	CacheTTL time.Duration
	// HTTPClient fetches the JWKS; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// withDefaults validates cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if err := CheckJWKSURL(cfg.JWKSURL); err != nil {
		return Config{}, fmt.Errorf("jwtauth: JWKS URL: %w", err)
	}
	if cfg.Issuer == "" {
		return Config{}, errors.New("jwtauth: issuer is required")
	}
	if cfg.Audience == "" {
		return Config{}, errors.New("jwtauth: audience is required")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms()
	}
	for _, alg := range cfg.Algorithms {
		if !supportedAlgorithms[alg] {
			return Config{}, fmt.Errorf("jwtauth: algorithm %q is not allowed (use RS*, PS*, ES* or EdDSA)", alg)
		}
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0 || cfg.Leeway > MaxLeeway:
		return Config{}, fmt.Errorf("jwtauth: leeway %s is outside (0, %s]", cfg.Leeway, MaxLeeway)
	}
	switch {
	case cfg.RefetchInterval == 0:
		cfg.RefetchInterval = DefaultRefetchInterval
	case cfg.RefetchInterval < 0:
		return Config{}, fmt.Errorf("jwtauth: refetch interval %s is negative", cfg.RefetchInterval)
	}
	switch {
	case cfg.CacheTTL == 0:
		cfg.CacheTTL = DefaultCacheTTL
	case cfg.CacheTTL < 0:
		return Config{}, fmt.Errorf("jwtauth: cache TTL %s is negative", cfg.CacheTTL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: defaultFetchTimeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}

// CheckJWKSURL is the rule for a JWKS URL: https, so keys cannot be
// swapped in transit; plain http only on loopback (local development and
// tests). shared/config applies it at start, New again.
func CheckJWKSURL(raw string) error {
	if raw == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	if u.Host == "" {
		return errors.New("has no host")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
		return errors.New("must be https (http only on loopback)")
	default:
		return errors.New("must be https")
	}
}
