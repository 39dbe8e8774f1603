package jwtauth

import (
	"net/http/httptest"
	"testing"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    string
		reason  string
	}{
		{name: "bearer", headers: []string{"Bearer abc.def.ghi"}, want: "abc.def.ghi"},
		{name: "scheme is case-insensitive", headers: []string{"bearer abc.def.ghi"}, want: "abc.def.ghi"},
		{name: "extra spaces", headers: []string{"  Bearer   abc.def.ghi  "}, want: "abc.def.ghi"},
		{name: "no header", reason: ReasonMissingToken},
		{name: "empty header", headers: []string{""}, reason: ReasonMissingToken},
		{name: "bearer without token", headers: []string{"Bearer"}, reason: ReasonMissingToken},
		{name: "bearer with blank token", headers: []string{"Bearer    "}, reason: ReasonMissingToken},
		{name: "basic", headers: []string{"Basic dXNlcjpwYXNz"}, reason: ReasonMalformed},
		{name: "token with a space", headers: []string{"Bearer abc def"}, reason: ReasonMalformed},
		{name: "two headers", headers: []string{"Bearer a.b.c", "Bearer d.e.f"}, reason: ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/tools", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, err := BearerToken(r)
			if tt.reason != "" {
				if Reason(err) != tt.reason || got != "" {
					t.Fatalf("got %q, %v; want reason %s", got, err, tt.reason)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
