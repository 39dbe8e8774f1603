package jwtauth

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewValidates(t *testing.T) {
	base := Config{JWKSURL: "https://idp.example.test/jwks", Issuer: "iss", Audience: "aud"}
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "alg none", mutate: func(c *Config) { c.Algorithms = []string{"none"} }, wantErr: `"none"`},
		{name: "HS256", mutate: func(c *Config) { c.Algorithms = []string{"RS256", "HS256"} }, wantErr: `"HS256"`},
		{name: "unknown alg", mutate: func(c *Config) { c.Algorithms = []string{"rs256"} }, wantErr: `"rs256"`},
		{name: "every asymmetric alg", mutate: func(c *Config) {
			c.Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
		}},
		{name: "negative leeway", mutate: func(c *Config) { c.Leeway = -time.Second }, wantErr: "leeway"},
		{name: "leeway at max", mutate: func(c *Config) { c.Leeway = MaxLeeway }},
		{name: "leeway over max", mutate: func(c *Config) { c.Leeway = MaxLeeway + time.Second }, wantErr: "leeway"},
		{name: "negative refetch interval", mutate: func(c *Config) { c.RefetchInterval = -1 }, wantErr: "refetch"},
		{name: "negative cache TTL", mutate: func(c *Config) { c.CacheTTL = -1 }, wantErr: "TTL"},
		{name: "no issuer", mutate: func(c *Config) { c.Issuer = "" }, wantErr: "issuer"},
		{name: "no audience", mutate: func(c *Config) { c.Audience = "" }, wantErr: "audience"},
		{name: "no JWKS URL", mutate: func(c *Config) { c.JWKSURL = "" }, wantErr: "JWKS"},
		{name: "JWKS over http", mutate: func(c *Config) { c.JWKSURL = "http://idp.example.test/jwks" }, wantErr: "https"},
		{name: "JWKS over file", mutate: func(c *Config) { c.JWKSURL = "file:///etc/jwks" }, wantErr: "JWKS"},
		{name: "JWKS on localhost", mutate: func(c *Config) { c.JWKSURL = "http://localhost:9000/jwks" }},
		{name: "JWKS on ::1", mutate: func(c *Config) { c.JWKSURL = "http://[::1]:9000/jwks" }},
		{name: "own client", mutate: func(c *Config) { c.HTTPClient = &http.Client{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mutate(&cfg)
			v, err := New(cfg)
			if tt.wantErr == "" {
				if err != nil || v == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one mentioning %s", err, tt.wantErr)
			}
		})
	}
}

func TestDefaultAlgorithmsIsACopy(t *testing.T) {
	a := DefaultAlgorithms()
	a[0] = "none"
	if DefaultAlgorithms()[0] == "none" {
		t.Fatal("DefaultAlgorithms exposes package state")
	}
}
