package toolhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const fuzzCanary = "fuzz-canary-3e9d"

// FuzzArgsHash checks, for any input, that ArgsHash never panics; that an
// error wraps ErrInvalidArgs and holds no canary; and that a hash is stable:
// hashing its own canonical form again gives the same hash, the canonical
// form is valid JSON without the canary, and the definition (canonicalize
// the JSON of Redact of the decoded value) gives the same hash.
func FuzzArgsHash(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `[]`, `null`, `"x"`, `1e400`, `{"a":1,"a":2}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		`{"\u20ac":"Euro Sign","\r":"CR","\ufb33":"x","1":"One","\ud83d\ude00":"E","\u0080":"C\u007f","\u00f6":"o"}`,
		`{"k":"` + fuzzCanary + `","` + fuzzCanary + `":[1,"x` + fuzzCanary + `"]}`,
		`{"id":"` + awsKeyID + `","secret":"` + awsSecret + `"}`,
		`["` + apiKey + `","Bearer abc123DEF456","` + jwt + `","` + slackBot + `","ghp` + ghClassic + `","` + hex32 + `"]`,
		`{"[REDACTED]":1,"` + hex32 + `":2,"` + fuzzCanary + `":3}`,
		benchArgs,
	} {
		f.Add([]byte(seed))
	}
	known := []string{fuzzCanary}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ArgsHash(in, known)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgs) {
				t.Fatalf("error %v does not wrap ErrInvalidArgs", err)
			}
			if strings.Contains(err.Error(), fuzzCanary) {
				t.Fatalf("error holds the canary: %v", err)
			}
			return
		}
		c, err := canonicalRedacted(in, newRedactor(known))
		if err != nil {
			t.Fatalf("canonicalRedacted failed after ArgsHash succeeded: %v", err)
		}
		if sha256Hex(c) != h {
			t.Fatal("hash is not the SHA-256 of the canonical form")
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		if bytes.Contains(c, []byte(fuzzCanary)) {
			t.Fatalf("canonical form holds the canary: %q", c)
		}
		again, err := ArgsHash(c, known)
		if err != nil || again != h {
			t.Fatalf("re-hashing the canonical form: %s, %v; want %s", again, err, h)
		}
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return // encoding/json's limits differ (nesting depth)
		}
		if got := treeHash(t, in, known); got != h {
			t.Fatalf("definition gives %s, ArgsHash %s for %q", got, h, in)
		}
	})
}
