package domain

import (
	"errors"
	"strings"
	"testing"
)

func TestGrantIDSpecFormula(t *testing.T) {
	// sha256("OAuthApp/slack-bot:slack:team:T111") computed independently.
	got := GrantID(ObjectRef{Kind: "OAuthApp", Name: "slack-bot"}, "slack:team:T111")
	if got != "grant-99a2b7d40af41f9f" {
		t.Fatalf("GrantID = %s", got)
	}
	app := ObjectRef{Kind: "OAuthApp", Name: "a"}
	if GrantID(app, "s1") == GrantID(app, "s2") {
		t.Fatal("different subjects share a grant id")
	}
	if err := ValidateGrantID(got); err != nil {
		t.Fatal(err)
	}
}

func TestNewSessionID(t *testing.T) {
	a, b := NewSessionID(), NewSessionID()
	if err := ValidateSessionID(a); err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two session ids are equal")
	}
}

func TestValidateIDs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		validate func(string) error
		id       string
		ok       bool
	}{
		{"grant", ValidateGrantID, "grant-0123456789abcdef", true},
		{"grant upper case", ValidateGrantID, "grant-0123456789ABCDEF", false},
		{"grant short", ValidateGrantID, "grant-0123456789abcde", false},
		{"grant long", ValidateGrantID, "grant-0123456789abcdef0", false},
		{"grant not hex", ValidateGrantID, "grant-0123456789abcdeg", false},
		{"grant traversal", ValidateGrantID, "grant-../../etc/pass", false},
		{"grant zero byte", ValidateGrantID, "grant-0123456789abcde\x00", false},
		{"grant as session", ValidateGrantID, "as-0123456789abcdef0123456789abcdef", false},
		{"empty grant", ValidateGrantID, "", false},
		{"session", ValidateSessionID, "as-0123456789abcdef0123456789abcdef", true},
		{"session upper case", ValidateSessionID, "as-0123456789abcdef0123456789abcdeF", false},
		{"session short", ValidateSessionID, "as-0123456789abcdef", false},
		{"session trailing slash", ValidateSessionID, "as-0123456789abcdef0123456789abcde/", false},
		{"session as grant", ValidateSessionID, "grant-0123456789abcdef", false},
		{"empty session", ValidateSessionID, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.validate(tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("validate(%q) = %v, want ok %v", tc.id, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalidID) || strings.ContainsRune(err.Error(), 0)) {
				t.Fatalf("error %q does not wrap ErrInvalidID or holds a raw zero byte", err)
			}
		})
	}
}
