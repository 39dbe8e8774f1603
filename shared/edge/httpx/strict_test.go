package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// tokenLike mirrors httpapi's token request, the body the runtime
// sends most often.
type tokenLike struct {
	OAuthAppRef   json.RawMessage `json:"oauthAppRef"`
	Scopes        []string        `json:"scopes"`
	MinTTLSeconds *int            `json:"minTtlSeconds"`
	Turn          *struct {
		Auth   domain.TurnAuth `json:"auth"`
		Origin map[string]any  `json:"origin"`
		Resume *struct {
			SwarmRef    *domain.ObjectRefLike `json:"swarmRef"`
			InstanceKey string                `json:"instanceKey"`
			AgentName   string                `json:"agentName"`
		} `json:"resume"`
	} `json:"turn"`
}

const benchTokenBody = `{"oauthAppRef":"OAuthApp/slack-bot","scopes":["chat:write","channels:read"],"minTtlSeconds":300,` +
	`"turn":{"auth":{"actor":{"type":"user","id":"U0123ABCD","display":"Mia"},"subjects":{"global":"slack:team:T0001","user":"slack:user:U0123ABCD"},` +
	`"claims":{"sub":"U0123ABCD","tenant":"acme","groups":["support","billing"]}},` +
	`"origin":{"connector":"slack","channel":"C0456EFGH","threadTs":"1700000000.000100"},` +
	`"resume":{"swarmRef":{"kind":"Swarm","name":"support"},"instanceKey":"slack:C0456EFGH:1700000000.000100","agentName":"triage"}}}`

// BenchmarkDecodeJSONTokenRequest measures DecodeJSON on a typical token
// request body (about 500 bytes), request construction excluded.
func BenchmarkDecodeJSONTokenRequest(b *testing.B) {
	w := httptest.NewRecorder()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchTokenBody)))
	for b.Loop() {
		r := &http.Request{Method: "POST", Header: http.Header{}, Body: http.NoBody}
		r.Body = nopCloser{strings.NewReader(benchTokenBody)}
		var req tokenLike
		if !DecodeJSON(w, r, DefaultMaxBody, &req) {
			b.Fatal(w.Body.String())
		}
	}
}

// BenchmarkCheckKeys is the strict decoder's second pass alone, on the
// same body.
func BenchmarkCheckKeys(b *testing.B) {
	body := []byte(benchTokenBody)
	t := reflect.TypeFor[*tokenLike]()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := checkKeys(body, t); err != nil {
			b.Fatal(err)
		}
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// promoted has a field promoted from an embedded struct, as
// domain.ObjectRefLike has.
type promoted struct {
	domain.ObjectRef
	Extra string `json:"extra,omitempty"`
}

// Issue 17 item 10: encoding/json matched "Auth" to "auth" and kept the
// last of duplicate keys; the strict decoder refuses both, at any depth,
// naming the key and where it is.
func TestDecodeJSONRefusesDuplicateAndMiscasedKeys(t *testing.T) {
	many := func(dupe bool) string {
		var b strings.Builder
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dupe {
			b.WriteString(`"k3":0,`)
		}
		return `{"turn":{"origin":{` + strings.TrimSuffix(b.String(), ",") + `}}}`
	}
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name, body, want string
	}{
		// Accepted: exact names; the same key in different objects;
		// keys of a map differing in case (a map keeps both); many keys.
		{"exact", benchTokenBody, ""},
		{"same key in two objects", `{"turn":{"auth":{"actor":{"id":"a"},"subjects":{"user":"u"}},"origin":{"id":"x"}}}`, ""},
		{"map keys differing in case", `{"turn":{"origin":{"a":1,"A":2},"auth":{"claims":{"Sub":"x","sub":"y"}}}}`, ""},
		{"many distinct keys", many(false), ""},
		{"reference as a string", `{"turn":{"resume":{"swarmRef":"Swarm/s","instanceKey":"k","agentName":"a"}}}`, ""},

		{"top-level field in another case", `{"Scopes":["a"]}`, `unknown field "Scopes" at $ (did you mean "scopes"?)`},
		{"nested field in another case", `{"turn":{"Auth":{}}}`, `unknown field "Auth" at $.turn (did you mean "auth"?)`},
		{"upper case", `{"turn":{"auth":{"ACTOR":{"id":"a"}}}}`, `unknown field "ACTOR" at $.turn.auth (did you mean "actor"?)`},
		{"escaped key in another case", `{"turn":{"\u0041uth":{}}}`, `unknown field "Auth" at $.turn (did you mean "auth"?)`},
		{"Kelvin sign folds to k", `{"turn":{"resume":{"swarmRef":{"\u212aind":"Swarm","name":"s"}}}}`, `unknown field "Kind" at $.turn.resume.swarmRef (did you mean "kind"?)`},
		{"reference object in another case", `{"turn":{"resume":{"swarmRef":{"Kind":"Swarm","name":"s"}}}}`, `unknown field "Kind" at $.turn.resume.swarmRef (did you mean "kind"?)`},

		// Issue 18: an unknown field is named with where it is and, for a
		// near miss, what it likely means (domain.Suggest).
		{"unknown near miss", `{"scope":["a"]}`, `unknown field "scope" at $ (did you mean "scopes"?)`},
		{"unknown, the beginning of a field", `{"turn":{"resume":{"agnet":"a"}}}`, `unknown field "agnet" at $.turn.resume (did you mean "agentName"?)`},
		{"unknown in a reference object", `{"turn":{"resume":{"swarmRef":{"kind":"Swarm","nme":"s"}}}}`, `unknown field "nme" at $.turn.resume.swarmRef (did you mean "name"?)`},
		{"unknown, nothing near", `{"turn":{"auth":{"zzz":1}}}`, `unknown field "zzz" at $.turn.auth`},
		{"unknown after a map of the same key", `{"turn":{"origin":{"agnet":1},"resume":{"agnet":"a"}}}`, `unknown field "agnet" at $.turn.resume (did you mean "agentName"?)`},
		{"unknown, a duplicate first", `{"turn":{"origin":{"a":1,"a":2},"x":1}}`, `duplicate key "a" at $.turn.origin`},

		{"top-level duplicate", `{"scopes":["a"],"scopes":["b"]}`, `duplicate key "scopes" at $`},
		{"nested duplicate", `{"turn":{"auth":{},"auth":{"actor":{"id":"x"}}}}`, `duplicate key "auth" at $.turn`},
		{"duplicate after a case variant", `{"turn":{"auth":{},"Auth":{}}}`, `unknown field "Auth" at $.turn (did you mean "auth"?)`},
		{"duplicate in a map", `{"turn":{"origin":{"a":1,"a":2}}}`, `duplicate key "a" at $.turn.origin`},
		{"duplicate in free-form claims", `{"turn":{"auth":{"claims":{"x":{"y":1,"y":2}}}}}`, `duplicate key "y" at $.turn.auth.claims.x`},
		{"duplicate in an array element", `{"turn":{"auth":{"claims":{"g":[{},{"k":1,"k":2}]}}}}`, `duplicate key "k" at $.turn.auth.claims.g[1]`},
		{"duplicate in raw JSON", `{"oauthAppRef":{"kind":"OAuthApp","kind":"Other","name":"n"}}`, `duplicate key "kind" at $.oauthAppRef`},
		{"duplicate written with an escape", `{"scopes":[],"\u0073copes":[]}`, `duplicate key "scopes" at $`},
		{"invalid UTF-8 keys read as one", "{\"turn\":{\"origin\":{\"\xff\":1,\"\xfe\":2}}}", "duplicate key \"\ufffd\" at $.turn.origin"},
		{"duplicate among many keys", many(true), `duplicate key "k3" at $.turn.origin`},
		{"path through an odd key", `{"turn":{"origin":{"a b":{"k":1,"k":2}}}}`, `duplicate key "k" at $.turn.origin["a b"]`},
		{"long key cut", `{"turn":{"origin":{"` + long + `":1,"` + long + `":2}}}`, `duplicate key "` + strings.Repeat("x", 64) + `…" at $.turn.origin`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got tokenLike
			rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
				if DecodeJSON(w, r, DefaultMaxBody, &got) {
					w.WriteHeader(http.StatusNoContent)
				}
			}, httptest.NewRequest("POST", "/v1/oauth/token", strings.NewReader(tc.body)))
			if tc.want == "" {
				if rec.Code != http.StatusNoContent {
					t.Fatalf("refused: %d %s", rec.Code, rec.Body)
				}
				return
			}
			if rec.Code != http.StatusBadRequest || b.Error.Code != CodeInvalidRequest || b.Error.Message != "request body: "+tc.want {
				t.Fatalf("%d %+v, want 400 %s %q", rec.Code, b.Error, CodeInvalidRequest, "request body: "+tc.want)
			}
			if b.Error.RequestID == "" {
				t.Fatalf("no request id: %s", rec.Body)
			}
		})
	}
}

func TestUnmarshalFollowsEncodingJSONNames(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"promoted field", `{"kind":"Swarm","name":"s","extra":"e"}`, ""},
		{"promoted field in another case", `{"kind":"Swarm","Name":"s"}`, `unknown field "Name" at $ (did you mean "name"?)`},
		{"own field in another case", `{"EXTRA":"e"}`, `unknown field "EXTRA" at $ (did you mean "extra"?)`},
		{"duplicate promoted field", `{"kind":"Swarm","kind":"Tool"}`, `duplicate key "kind" at $`},
		{"trailing data", `{"kind":"Swarm"} x`, "unexpected data after the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v promoted
			err := Unmarshal([]byte(tc.body), &v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || JSONProblem(err) != tc.want):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// The strict reading of a reference held as raw JSON (the token
	// route's oauthAppRef): domain.ObjectRefLike's own decoder ignores
	// case, the key check does not.
	var ref domain.ObjectRefLike
	if err := Unmarshal([]byte(`{"kind":"OAuthApp","NAME":"x"}`), &ref); err == nil || JSONProblem(err) != `unknown field "NAME" at $ (did you mean "name"?)` {
		t.Fatalf("reference in another case: %v", err)
	}
	if err := Unmarshal([]byte(`"OAuthApp/x"`), &ref); err != nil || ref.Name != "x" {
		t.Fatalf("reference string: %v %+v", err, ref)
	}
}

func TestReadJSONRefusesDuplicateKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		mentions   string
	}{
		{"object", `{"name":"refunds","Name":"other"}`, 200, ""},
		{"array", `[{"a":1},{"a":2}]`, 200, ""},
		{"duplicate", `{"name":"refunds","content":"c","name":"other"}`, 400, `duplicate key "name" at $`},
		{"nested duplicate", `{"inputSchema":{"properties":{"a":{},"a":{}}}}`, 400, `duplicate key "a" at $.inputSchema.properties`},
		{"not JSON", `{"name":`, 400, "truncated JSON"},
		{"two values", `{} {}`, 400, "after the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
				if body, ok := ReadJSON(w, r, DefaultMaxBody); ok {
					_, _ = w.Write(body)
				}
			}, httptest.NewRequest("POST", "/v1/admin/tenants/a/skills", strings.NewReader(tc.body)))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 200 && rec.Body.String() != tc.body {
				t.Fatalf("body %s, want it as sent", rec.Body)
			}
			if tc.status != 200 && (b.Error.Code != CodeInvalidRequest || !strings.Contains(b.Error.Message, tc.mentions)) {
				t.Fatalf("error %+v, want one mentioning %q", b.Error, tc.mentions)
			}
		})
	}
}

// FuzzUnmarshal checks the strict decoder against encoding/json and a
// duplicate-key finder written on the json.Decoder.Token API: it accepts
// only what encoding/json's strict decoding accepts and has no duplicate
// key; a duplicate it names is one; a key it names as in another case
// folds to the field it names; any other error is encoding/json's.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{benchTokenBody, `{"turn":{"Auth":{}}}`, `{"scopes":[],"scopes":[]}`,
		`{"turn":{"origin":{"a":[{"b":1,"b":2}]}}}`, `{"oauthAppRef":{"kind":"OAuthApp","name":"x"}}`,
		`{"turn":{"resume":{"swarmRef":{"Kind":"S","name":"s"}}}}`, `{"\u0073copes":null}`, `{"minTtlSeconds":1e3}`,
		`{"turn":{"origin":{"\ud800":1,"\udc00":2}}}`, `{"oauthAppRef":[1,{"a":true,"b":false}]} `, "\xff", `{"a":1}]`,
		`{"scope":[]}`, `{"turn":{"resume":{"agnet":"a","swarmRef":{"kind":"S","nme":"n"}}}}`, `{"turn":{"origin":{"x":1},"x":2}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var got tokenLike
		err := Unmarshal([]byte(body), &got)
		var want tokenLike
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		stdErr := dec.Decode(&want)
		dups, tokErr := duplicateKeys(body)
		var ke *KeyError
		switch {
		case err == nil:
			if stdErr != nil || len(dups) > 0 {
				t.Fatalf("accepted; encoding/json: %v, duplicates %v", stdErr, dups)
			}
		case errors.As(err, &ke) && stdErr == nil:
			// A duplicate, or a field in another case (which
			// encoding/json fills).
			dup := !ke.Unknown && tokErr == nil && dups[ke.Key]
			if !dup && (ke.Key == ke.Want || !strings.EqualFold(ke.Key, ke.Want)) {
				t.Fatalf("%v; token walk: %v, duplicates %v", err, tokErr, dups)
			}
		case errors.As(err, &ke):
			// encoding/json refused an unknown field: the scan names
			// it, or a duplicate or field in another case before it.
			key, ok := unknownField(stdErr)
			named := ke.Unknown && ke.Key == cut(key)
			earlier := !ke.Unknown && dups[ke.Key] || ke.Key != ke.Want && strings.EqualFold(ke.Key, ke.Want)
			if !ok || !named && !earlier {
				t.Fatalf("%v; encoding/json: %v, duplicates %v", err, stdErr, dups)
			}
		case errors.Is(err, errTrailing):
			if stdErr != nil {
				t.Fatalf("%v; encoding/json: %v", err, stdErr)
			}
		default:
			if stdErr == nil || err.Error() != stdErr.Error() {
				t.Fatalf("%v; encoding/json: %v", err, stdErr)
			}
		}
	})
}

// duplicateKeys is every key that occurs twice in one object of the first
// JSON value of s (cut as KeyError cuts), found with the Token API.
func duplicateKeys(s string) (map[string]bool, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	dups := map[string]bool{}
	var value func() error
	value = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					dups[cut(k.(string))] = true
				}
				seen[k.(string)] = true
				if err := value(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := value(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	err := value()
	return dups, err
}

func TestJSONTagIsTagGet(t *testing.T) {
	for _, tag := range []reflect.StructTag{
		`json:"auth"`, `json:"auth,omitempty"`, `json:"-"`, `json:"-,"`, `json:""`, `json:",omitempty"`,
		`json:"a\"b"`, `yaml:"x" json:"y"`, `json:"y" yaml:"x"`, `xjson:"z"`, ``, `json:"unterminated`,
	} {
		if got, want := jsonTag(tag), tag.Get("json"); got != want {
			t.Errorf("jsonTag(%s) = %q, Get = %q", tag, got, want)
		}
	}
}
