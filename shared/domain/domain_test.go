package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret("tok-123-very-secret")
	type holder struct {
		Token Secret
		Ptr   *Secret
	}
	h := holder{Token: s, Ptr: &s}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%10s", "%d"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h))
	}
	outs = append(outs, fmt.Sprint(s), fmt.Sprintln(s), s.String(), s.GoString())
	j, _ := json.Marshal(h)
	outs = append(outs, string(j))
	txt, _ := s.MarshalText()
	outs = append(outs, string(txt))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "token", s, "holder", h)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", "token", s)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, "tok-123") || strings.Contains(o, fmt.Sprintf("%x", "tok-123")) {
			t.Fatalf("secret leaked: %q", o)
		}
	}
	if s.Reveal() != "tok-123-very-secret" || s.IsZero() || !NewSecret("").IsZero() {
		t.Fatal("Reveal/IsZero")
	}
	if !s.Equal(NewSecret("tok-123-very-secret")) || s.Equal(NewSecret("tok-124-very-secret")) {
		t.Fatal("Equal")
	}
}

func TestObjectRefLike(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ObjectRef
		ok   bool
	}{
		{`"OAuthApp/slack-bot"`, ObjectRef{"OAuthApp", "slack-bot"}, true},
		{`{"kind":"OAuthApp","name":"slack-bot"}`, ObjectRef{"OAuthApp", "slack-bot"}, true},
		{` "Swarm/default" `, ObjectRef{"Swarm", "default"}, true},
		{`"slack-bot"`, ObjectRef{}, false},
		{`"OAuthApp/"`, ObjectRef{}, false},
		{`"/x"`, ObjectRef{}, false},
		{`"a/b/c"`, ObjectRef{}, false},
		{`{"kind":"OAuthApp"}`, ObjectRef{}, false},
		{`{"kind":"","name":"x"}`, ObjectRef{}, false},
		{`7`, ObjectRef{}, false},
		{`null`, ObjectRef{}, false},
		{`["OAuthApp","x"]`, ObjectRef{}, false},
		{`{"kind":"OAuthApp","name":"x","namespace":"n"}`, ObjectRef{}, false},
	} {
		var r ObjectRefLike
		err := json.Unmarshal([]byte(tc.in), &r)
		if (err == nil) != tc.ok || (tc.ok && r.ObjectRef != tc.want) {
			t.Errorf("%s: %+v %v", tc.in, r, err)
		}
	}
	// An unknown field is refused by name, also inside a strict decoder
	// (whose DisallowUnknownFields does not reach an UnmarshalJSON).
	var body struct {
		Ref ObjectRefLike `json:"ref"`
	}
	dec := json.NewDecoder(strings.NewReader(`{"ref":{"kind":"OAuthApp","name":"x","namespace":"n"}}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err == nil || !strings.Contains(err.Error(), `unknown field "namespace"`) {
		t.Fatalf("unknown field in a ref: %v", err)
	}
	if r, err := ParseObjectRef("bare", "OAuthApp"); err != nil || r.String() != "OAuthApp/bare" {
		t.Fatalf("default kind: %v %v", r, err)
	}
}

func TestBindingAADDistinguishesFields(t *testing.T) {
	a := Binding{Record: "grant", RecordID: "grant-1", Field: "accessToken"}.AAD()
	for _, b := range []Binding{
		{Record: "grant", RecordID: "grant-1", Field: "refreshToken"},
		{Record: "grant", RecordID: "grant-2", Field: "accessToken"},
		{Record: "session", RecordID: "grant-1", Field: "accessToken"},
	} {
		if bytes.Equal(a, b.AAD()) {
			t.Fatalf("%+v shares additional data", b)
		}
	}
}
