package toolhooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// canonicalOf runs ArgsHash's canonicalizer and redaction without hashing.
func canonicalOf(t testing.TB, args string, known ...string) string {
	t.Helper()
	c, err := canonicalRedacted([]byte(args), newRedactor(known))
	if err != nil {
		t.Fatalf("canonicalRedacted(%q): %v", args, err)
	}
	return string(c)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRFC8785Examples runs the examples of RFC 8785 through the
// canonicalizer ArgsHash uses.
func TestRFC8785Examples(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{
			// RFC 8785 §3.2.2 (and its Appendix A).
			name: "primitive serialization",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			want: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			// RFC 8785 §3.2.3: properties sorted by UTF-16 code units, so
			// U+1F600 (a surrogate pair starting 0xD83D) sorts before U+FB33.
			name: "property sorting",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control\u007f",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\u007f\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{"numbers from the issue", `[1e+30, 1E30, 4.50, 2e-3, 0.000001, 0.0000001, 1e-6]`, `[1e+30,1e+30,4.5,0.002,0.000001,1e-7,0.000001]`},
		{"minus zero", `[-0, -0.0, 0e10]`, `[0,0,0]`},
		{"integers beyond 2^53 become doubles", `[9007199254740993, 123456789012345678901234567890]`, `[9007199254740992,1.2345678901234568e+29]`},
		{"underflow is zero", `[1e-400]`, `[0]`},
		{"unicode escapes decoded, controls escaped lowercase", `"\u0041\u00e9\u4e2d\ud83d\ude00\u001f\u0008\u000c\u2028"`, "\"Aé中😀\\u001f\\b\\f\u2028\""},
		{"no HTML escaping", `"<a href='x'>&amp;</a>"`, `"<a href='x'>&amp;</a>"`},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"nested and empty containers", `{"b":[],"a":{},"c":[{}, [[]]]}`, `{"a":{},"b":[],"c":[{},[[]]]}`},
		{"top-level scalars", `  true `, `true`},
		{"absent arguments are {}", ` `, `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canonicalOf(t, tc.in); got != tc.want {
				t.Fatalf("canonical form\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRFC8785Numbers is RFC 8785 Appendix B: IEEE 754 values and their
// ECMAScript serialization (checked against node's JSON.stringify).
func TestRFC8785Numbers(t *testing.T) {
	tests := []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, tc := range tests {
		bits, err := strconv.ParseUint(tc.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(bits)
		for _, format := range []byte{'g', 'e', 'f'} {
			in := strconv.FormatFloat(f, format, -1, 64)
			if got := canonicalOf(t, in); got != tc.want {
				t.Errorf("%s (%s): canonical %s, want %s", tc.bits, in, got, tc.want)
			}
		}
	}
}

func TestArgsHashGolden(t *testing.T) {
	tests := []struct{ in, want string }{
		// sha256("{}"), the hash of absent arguments.
		{``, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{`{}`, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		// sha256(`{"limit":10,"path":"/tmp/x","recursive":true}`), computed
		// independently with node's crypto.
		{`{"recursive": true, "path": "\/tmp\/x", "limit": 1.0E1}`, "24baa3c5590540877659f01a516dbc4f20ff150c34d7df727477117ac75df65d"},
	}
	for _, tc := range tests {
		got, err := ArgsHash(json.RawMessage(tc.in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("ArgsHash(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestArgsHashIgnoresSpelling(t *testing.T) {
	base := `{"b":[1,2,{"y":"z","x":1.5}],"a":"é","c":null}`
	same := []string{
		`{"a":"é","b":[1,2,{"x":1.5,"y":"z"}],"c":null}`,
		"{\n  \"c\" : null ,\n\t\"b\" : [ 1 , 2.0 , { \"x\" : 15e-1 , \"y\" : \"\\u007a\" } ] ,\r\n \"a\" : \"\\u00e9\"\n}",
		`{"c":null,"a":"\u00E9","b":[1E0,0.2e1,{"y":"z","x":1.50}]}`,
	}
	want, err := ArgsHash(json.RawMessage(base), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range same {
		got, err := ArgsHash(json.RawMessage(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("ArgsHash(%s) = %s, want %s (same value as %s)", in, got, want, base)
		}
	}
	different := []string{
		`{"b":[2,1,{"y":"z","x":1.5}],"a":"é","c":null}`,   // array order matters
		`{"b":[1,2,{"y":"z","x":1.51}],"a":"é","c":null}`,  // number
		`{"b":[1,2,{"y":"Z","x":1.5}],"a":"é","c":null}`,   // string case
		`{"b":[1,2,{"y":"z","x":1.5}],"a":"e","c":null}`,   // accent
		`{"b":[1,2,{"y":"z","x":1.5}],"a":"é","c":false}`,  // literal
		`{"b":[1,2,{"y":"z","x":1.5}],"a":"é"}`,            // missing member
		`{"b":[1,2,{"y":"z","x":"1.5"}],"a":"é","c":null}`, // type
		`{"B":[1,2,{"y":"z","x":1.5}],"a":"é","c":null}`,   // name
	}
	seen := map[string]string{want: base}
	for _, in := range different {
		got, err := ArgsHash(json.RawMessage(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("ArgsHash(%s) = ArgsHash(%s)", in, prev)
		}
		seen[got] = in
	}
}

// TestArgsHashRejects checks invalid input: an error wrapping
// ErrInvalidArgs that holds no part of the input.
func TestArgsHashRejects(t *testing.T) {
	const canary = "canary-9c41e7-do-not-log"
	tests := []struct{ name, in, want string }{
		{"syntax", `{"` + canary + `": tru}`, "not valid JSON after byte"},
		{"truncated", `{"k":"` + canary + `"`, "unexpected end of JSON"},
		{"trailing garbage", `{"k":1} ` + canary, "not valid JSON"},
		{"duplicate name", `{"` + canary + `":1,"` + canary + `":2}`, "duplicate object member name"},
		{"invalid UTF-8", "{\"k\":\"" + canary + "\xff\"}", "not valid JSON"},
		{"lone surrogate", `{"k":"` + canary + `\ud800"}`, "not valid JSON"},
		{"number overflow", `{"` + canary + `":1e400}`, "number out of the float64 range at byte"},
		{"negative overflow", `[-1.8e308, "` + canary + `"]`, "number out of the float64 range"},
		{"overflow with a leading 9", `{"` + canary + `":9e308}`, "number out of the float64 range"},
		{"bare word", canary, "not valid JSON"},
		{"single quotes", `{'k':'` + canary + `'}`, "not valid JSON"},
		{"leading zero", `{"k":0123}`, "not valid JSON"},
		{"NaN", `[NaN]`, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ArgsHash(json.RawMessage(tc.in), []string{canary})
			if err == nil {
				t.Fatalf("ArgsHash = %s, want an error", h)
			}
			if h != "" {
				t.Errorf("hash %q returned with an error", h)
			}
			if !errors.Is(err, ErrInvalidArgs) {
				t.Errorf("error %v does not wrap ErrInvalidArgs", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want it to say %q", msg, tc.want)
			}
			if strings.Contains(msg, canary) || strings.Contains(msg, "canary") || strings.Contains(msg, "tru") {
				t.Errorf("error echoes the input: %q", msg)
			}
		})
	}
}

// TestRedactionOnCanonicalMatchesTree checks the fast path (redacting the
// canonical text) against the definition: canonicalize the JSON of Redact
// applied to the decoded arguments.
func TestRedactionOnCanonicalMatchesTree(t *testing.T) {
	inputs := []string{
		`{"a":"x","b":["sk-` + strings.Repeat("Ab3", 8) + `",1,{"c":"` + strings.Repeat("ab", 20) + `"}]}`,
		`{"id":"AKIAIOSFODNN7EXAMPLE","secret":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY","n":[1e30,"x"]}`,
		`["AKIAIOSFODNN7EXAMPLE","wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]]`,
		`{"known-secret-value":"v","[REDACTED]":"taken","deadbeefdeadbeefdeadbeefdeadbeef":{"x":"known-secret-value"}}`,
		`"Bearer abcdef123456"`,
		`{"\u20ac":"known-secret-value \u00e9","\ud83d\ude00":[true,null,-0.0]}`,
	}
	for _, in := range inputs {
		fast, err := ArgsHash(json.RawMessage(in), []string{"known-secret-value"})
		if err != nil {
			t.Fatal(err)
		}
		if slow := treeHash(t, []byte(in), []string{"known-secret-value"}); fast != slow {
			t.Errorf("%s: canonical-path hash %s, tree-path hash %s", in, fast, slow)
		}
	}
}

// treeHash computes argsHash by its definition: decode, Redact, encode,
// canonicalize, hash.
func treeHash(t testing.TB, in []byte, known []string) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode: %v", err)
	}
	b, err := json.Marshal(Redact(v, known))
	if err != nil {
		t.Fatal(err)
	}
	c := jsontext.Value(b)
	if err := c.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	return sha256Hex(c)
}

func TestArgsHashDoesNotModifyInput(t *testing.T) {
	in := []byte(`{ "b" : "sk-` + strings.Repeat("Ab3", 8) + `", "a" : 4.50 }`)
	orig := bytes.Clone(in)
	if _, err := ArgsHash(in, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, orig) {
		t.Fatalf("input modified: %s", in)
	}
}

// TestArgsHashAcceptsTheLargestDouble: the largest double is in range, and
// a string after it that spells an out-of-range number is text, not a
// number.
func TestArgsHashAcceptsTheLargestDouble(t *testing.T) {
	for _, in := range []string{
		`[1.7976931348623157e+308,"1e999"]`,
		`{"max":-1.7976931348623157e+308,"s":"-1e400"}`,
		`[0.1e309,1.7976931348623157e+308]`, // 1e308: a leading 0 is part of the number
	} {
		t.Run(in, func(t *testing.T) {
			if _, err := ArgsHash(json.RawMessage(in), nil); err != nil {
				t.Fatalf("ArgsHash: %v", err)
			}
		})
	}
}

// TestRedactCanonicalRefusesTruncatedInput: the scanner of the canonical
// form answers errNotCanonical for text that ends early, wherever it ends,
// and never reads past it.
func TestRedactCanonicalRefusesTruncatedInput(t *testing.T) {
	for _, in := range []string{
		``,        // no value
		`[`,       // an array that never closes
		`{"a"`,    // a member name without its colon
		`{"a":`,   // a member without its value
		`{"a":1,`, // a comma without the next member
		`"abc`,    // a string that never closes
		`["a\`,    // an escape at the very end
	} {
		t.Run(in, func(t *testing.T) {
			out, err := newRedactor(nil).redactCanonical([]byte(in))
			if !errors.Is(err, errNotCanonical) {
				t.Fatalf("redactCanonical(%q) = %q, %v; want errNotCanonical", in, out, err)
			}
		})
	}
}
