package toolhooks

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Test tokens are assembled from pieces so that no file holds a string a
// secret scanner would take for a real credential.
var (
	hex32      = strings.Repeat("deadbeef", 4)
	apiKey     = "sk-" + strings.Repeat("Ab3x", 6)
	projKey    = "sk-proj-" + strings.Repeat("Q9_z-", 8)
	jwtHeader  = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	jwtPayload = base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"user-123"}`))
	jwt        = jwtHeader + "." + jwtPayload + "." + strings.Repeat("s1G_", 10)
	noAlgJWT   = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT"}`)) + "." + jwtPayload + ".c2ln"
	awsKeyID   = "AKIA" + "IOSFODNN7EXAMPLE"
	awsSTSID   = "ASIA" + "Y34FZKBOKMUTVV7A"
	awsSecret  = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
	slackBot   = "xoxb-" + "123456789012-1234567890123-" + strings.Repeat("aB3", 8)
	slackApp   = "xapp-" + "1-A0123BCDE-4567890123-" + strings.Repeat("x0y1", 8)
	ghClassic  = "_" + strings.Repeat("x1Y2z3", 6)
	ghFine     = "github_pat_" + strings.Repeat("11QRSTU", 4) + "_" + strings.Repeat("xY9", 20)
	// hexEdges is 32 hex digits holding each end of each hex range.
	hexEdges = "0123456789abcdef" + "0123456789ABCDEF"
	// bigHeader is a JWT header of exactly maxJOSEHeader base64url
	// characters (3072 bytes of JSON); bigHeader1 is one JSON byte more.
	bigHeader  = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"` + strings.Repeat("k", 3072-24) + `"}`))
	bigHeader1 = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"` + strings.Repeat("k", 3073-24) + `"}`))
)

// bearerWith is a bearer credential of letters whose only other character
// is sep: it is a token only if sep is part of the token68 alphabet.
func bearerWith(sep string) string { return "Bearer " + "qLrTvWx" + sep + "yZaBcDe" }

func TestSecretShapes(t *testing.T) {
	tests := []struct {
		name   string
		s      string
		secret bool
	}{
		{"sk key", apiKey, true},
		{"sk project key", projKey, true},
		{"sk key inside text", "use " + apiKey + " for this", true},
		{"sk key after punctuation", "key=" + apiKey, true},
		{"near miss: sk key too short", "sk-" + strings.Repeat("a", 19), false},
		{"near miss: sk inside a word", "task-" + strings.Repeat("abcd", 6), false},
		{"near miss: sk- prose", "sk-learn is a library", false},
		{"sk key of exactly 20", "sk-" + "T3BlbkFJx9Yq2Lm4Np7R", true},

		{"bearer", "Bearer " + "abc123DEF456ghi", true},
		{"bearer jwt", "Bearer " + jwt, true},
		{"bearer lower case, two blanks", "authorization: bearer  " + "Zm9vYmFyYmF6cXV4", true},
		{"near miss: bearer of prose", "Bearer responsibilities", false},
		{"near miss: bearer token too short", "Bearer ab1", false},
		{"near miss: bearer without blank", "Bearer:" + "abc123DEF456", false},
		{"bearer token of exactly 8", "Bearer " + "7fQ2mZp9", true},
		{"near miss: bearer token of 7", "Bearer " + "7fQ2mZp", false},
		{"near miss: bearer of capitalised prose", "Bearer AmazonZanzibar", false},
		{"bearer token with -", bearerWith("-"), true},
		{"bearer token with .", bearerWith("."), true},
		{"bearer token with _", bearerWith("_"), true},
		{"bearer token with ~", bearerWith("~"), true},
		{"bearer token with +", bearerWith("+"), true},
		{"bearer token with /", bearerWith("/"), true},
		{"near miss: bearer word then a comma", bearerWith(","), false},

		{"hex 32", hex32, true},
		{"hex 64 in text", "sha256=" + hex32 + hex32 + ";", true},
		{"hex upper case", strings.ToUpper(hex32), true},
		{"hex run inside a word", "key" + hex32, true},
		{"near miss: hex 31", hex32[:31], false},
		{"hex 32 with every range end", hexEdges, true},
		{"near miss: hex broken by /", hex32[:16] + "/" + hex32[:16], false},
		{"near miss: hex broken by :", hex32[:16] + ":" + hex32[:16], false},
		{"near miss: hex broken by `", hex32[:16] + "`" + hex32[:16], false},
		{"near miss: hex broken by @", hex32[:16] + "@" + hex32[:16], false},
		{"near miss: hex broken by G", hex32[:16] + "G" + hex32[:16], false},
		{"near miss: hex broken by g", hex32[:16] + "g" + hex32[:16], false},
		{"near miss: uuid", "3f2a9c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b", false},

		{"jwt", jwt, true},
		{"jwt in text", "token=" + jwt + "; path=/", true},
		{"unsecured jwt (empty signature)", jwtHeader + "." + jwtPayload + ".", true},
		{"near miss: header without alg", noAlgJWT, false},
		{"near miss: dotted words", "version 1.2.3 of a.b.c", false},
		{"near miss: two segments", jwtHeader + "." + jwtPayload, false},
		{"jwt with the largest header decoded", bigHeader + "." + jwtPayload + ".c2ln", true},
		{"near miss: jwt header past the decoding bound", bigHeader1 + "." + jwtPayload + ".c2ln", false},

		{"aws access key id", awsKeyID, true},
		{"aws sts key id", awsSTSID, true},
		{"aws key id in text", "id=" + awsKeyID + ",", true},
		{"aws key id with every range end", "AKIA" + "Z0A9QRSTUVWXY234", true},
		{"near miss: aws key id 15", awsKeyID[:19], false},
		{"near miss: aws key id 17", awsKeyID + "X", false},
		{"near miss: aws key id lower case", "AKIA" + strings.ToLower(awsKeyID[4:]), false},
		{"near miss: aws key id inside a word", "X" + awsKeyID, false},
		{"near miss: aws secret alone", awsSecret, false},

		{"slack bot", slackBot, true},
		{"slack user", "xoxp-" + "1234567890-abcdefghij", true},
		{"slack app", slackApp, true},
		{"slack xoxa", "xoxa-" + "2-1234567890-abcdefghij", true},
		{"slack xoxo", "xoxo-" + "1234567890-abcdefghij", true},
		{"slack xoxr", "xoxr-" + "1234567890-abcdefghij", true},
		{"slack xoxs", "xoxs-" + "1234567890-abcdefghij", true},
		{"slack body of exactly 10", "xoxb-" + "12345-ABCD", true},
		{"slack app body of exactly 10", "xapp-" + "1-A0123BCD", true},
		{"near miss: slack unknown kind", "xoxz-" + "1234567890-abcdefghij", false},
		{"near miss: slack too short", "xoxb-12345", false},
		{"near miss: slack body of 9", "xoxb-" + "12345-ABC", false},
		{"near miss: slack app body of 9", "xapp-" + "1-A0123BC", false},

		{"github ghp", "ghp" + ghClassic, true},
		{"github gho", "gho" + ghClassic, true},
		{"github ghu", "ghu" + ghClassic, true},
		{"github ghs", "ghs" + ghClassic, true},
		{"github ghr", "ghr" + ghClassic, true},
		{"github fine-grained", ghFine, true},
		{"near miss: github unknown kind", "ghx" + ghClassic, false},
		{"near miss: github too short", "ghp_" + strings.Repeat("a", 29), false},
		{"github of exactly 30", "ghp_" + strings.Repeat("aB3", 10), true},
		{"near miss: github_pat too short", "github_pat_" + strings.Repeat("a", 21), false},
		{"github_pat of exactly 22, underscore inside", "github_pat_" + "11ABCDEFGH" + "_" + "aBcDeFgHiJk", true},

		{"plain text", "Weekly churn-risk export for the EU region", false},
		{"korean text", "데이터 분석 보고서", false},
		{"empty", "", false},
	}
	r := newRedactor(nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.classify(tc.s).secret; got != tc.secret {
				t.Fatalf("classify(%q).secret = %v, want %v", tc.s, got, tc.secret)
			}
			// The same through ArgsHash's canonical form and through Redact.
			in, _ := json.Marshal(map[string]any{"v": tc.s, "n": 1})
			c := canonicalOf(t, string(in))
			redacted := strings.Contains(c, `"v":"[REDACTED]"`)
			if redacted != tc.secret {
				t.Fatalf("canonical form %s: redacted = %v, want %v", c, redacted, tc.secret)
			}
			if tc.secret && strings.Contains(c, tc.s) {
				t.Fatalf("canonical form %s holds the secret", c)
			}
			if got := Redact(tc.s, nil); (got == Redacted) != tc.secret {
				t.Fatalf("Redact = %v", got)
			}
		})
	}
}

func TestAWSSecretNextToKeyID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"object siblings", `{"id":"` + awsKeyID + `","secret":"` + awsSecret + `","region":"eu-west-1"}`,
			`{"id":"[REDACTED]","region":"eu-west-1","secret":"[REDACTED]"}`},
		{"array siblings", `["` + awsKeyID + `","` + awsSecret + `"]`, `["[REDACTED]","[REDACTED]"]`},
		{"secret inside a longer string", `{"a":"AWS_ACCESS_KEY_ID=` + awsKeyID + `","b":"AWS_SECRET_ACCESS_KEY=` + awsSecret + `"}`,
			`{"a":"[REDACTED]","b":"[REDACTED]"}`},
		{"same string", `{"cfg":"` + awsKeyID + ":" + awsSecret + `"}`, `{"cfg":"[REDACTED]"}`},
		{"no key id: kept", `{"secret":"` + awsSecret + `"}`, `{"secret":"` + awsSecret + `"}`},
		{"key id in a nested object is not a sibling", `{"creds":{"id":"` + awsKeyID + `"},"secret":"` + awsSecret + `"}`,
			`{"creds":{"id":"[REDACTED]"},"secret":"` + awsSecret + `"}`},
		{"near miss: 40 chars all lower case", `{"id":"` + awsKeyID + `","s":"` + strings.Repeat("abcdefghij", 4) + `"}`,
			`{"id":"[REDACTED]","s":"` + strings.Repeat("abcdefghij", 4) + `"}`},
		{"near miss: 41 chars", `{"id":"` + awsKeyID + `","s":"` + awsSecret + `Z"}`,
			`{"id":"[REDACTED]","s":"` + awsSecret + `Z"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canonicalOf(t, tc.in); got != tc.want {
				t.Fatalf("canonical form\n got %s\nwant %s", got, tc.want)
			}
			if got, want := treeHash(t, []byte(tc.in), nil), sha256Hex([]byte(tc.want)); got != want {
				t.Fatalf("Redact disagrees with ArgsHash")
			}
		})
	}
}

// TestClassifyVerdict checks the AWS flags classify reports alongside
// secret: a sibling's secret access key is redacted on them alone, so they
// must be set whatever else the string holds.
func TestClassifyVerdict(t *testing.T) {
	const known = "hunter2"
	lower40 := strings.Repeat("abcdefghij", 4)
	tests := []struct {
		name string
		s    string
		want verdict
	}{
		{"key id", awsKeyID, verdict{secret: true, awsKeyID: true}},
		{"key id after a known secret", known + " " + awsKeyID, verdict{secret: true, awsKeyID: true}},
		{"key id after another token", apiKey + " " + awsKeyID, verdict{secret: true, awsKeyID: true}},
		{"key id after long hex", hex32 + " " + awsSTSID, verdict{secret: true, awsKeyID: true}},
		{"secret access key shape", awsSecret, verdict{awsSecret: true}},
		{"secret access key shape in text", "s=" + awsSecret + ";", verdict{awsSecret: true}},
		{"secret access key shape next to a known secret", known + ":" + awsSecret, verdict{secret: true, awsSecret: true}},
		{"key id and secret access key", awsKeyID + ":" + awsSecret, verdict{secret: true, awsKeyID: true, awsSecret: true}},
		{"second run of 40 counts", strings.Repeat("z", 41) + " " + awsSecret, verdict{awsSecret: true}},
		{"near miss: 39 characters", awsSecret[1:], verdict{}},
		{"near miss: no upper case", strings.ToLower(awsSecret), verdict{}},
		{"near miss: no lower case", strings.ToUpper(awsSecret), verdict{}},
		{"near miss: letters only", lower40[:20] + strings.ToUpper(lower40[:20]), verdict{}},
		{"near miss: letters only, z and Z included", strings.Repeat("zyxwvAZBYa", 4), verdict{}},
		{"near miss: key id prefix alone", "AKIA", verdict{}},
	}
	r := newRedactor([]string{known})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.classify(tc.s); got != tc.want {
				t.Fatalf("classify(%q) = %+v, want %+v", tc.s, got, tc.want)
			}
		})
	}
}

// TestCanary puts a known secret value everywhere it can hide and checks it
// reaches neither the canonical form nor anything ArgsHash returns.
func TestCanary(t *testing.T) {
	const canary = "cAnArY-5b0e1f7d-leak-me-not"
	escaped := strings.ReplaceAll(canary, "A", `\u0041`)
	tests := []struct{ name, in string }{
		{"equal", `{"password":"` + canary + `"}`},
		{"contained", `{"q":"SELECT * FROM t WHERE pw = '` + canary + `'"}`},
		{"escaped in the input", `{"q":"` + escaped + `"}`},
		{"deep", `{"a":[{"b":[[{"c":"x` + canary + `x"}]]}]}`},
		{"member name", `{"` + canary + `":"v","k":1}`},
		{"escaped member name", `{"x` + escaped + `":{"y":"` + canary + `"}}`},
		{"two member names collide after redaction", `{"1` + canary + `":1,"2` + canary + `":2,"[REDACTED]":3}`},
		{"top-level string", `"` + canary + `"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := canonicalOf(t, tc.in, canary, "")
			if strings.Contains(strings.ToLower(c), strings.ToLower(canary)) {
				t.Fatalf("canonical form holds the canary: %s", c)
			}
			if !strings.Contains(c, Redacted) {
				t.Fatalf("nothing redacted: %s", c)
			}
			h, err := ArgsHash(json.RawMessage(tc.in), []string{canary})
			if err != nil {
				t.Fatal(err)
			}
			if h != sha256Hex([]byte(c)) {
				t.Fatalf("hash is not the SHA-256 of the canonical form")
			}
			if h2 := treeHash(t, []byte(tc.in), []string{canary}); h != h2 {
				t.Fatalf("Redact disagrees with ArgsHash: %s vs %s", h, h2)
			}
			if got, _ := json.Marshal(Redact(decodeJSON(t, tc.in), []string{canary})); strings.Contains(string(got), canary) {
				t.Fatalf("Redact kept the canary: %s", got)
			}
		})
	}
	// The canary redacted changes nothing else: only the string holding it.
	if got := canonicalOf(t, `{"b":"`+canary+`","a":"keep"}`, canary); got != `{"a":"keep","b":"[REDACTED]"}` {
		t.Fatalf("got %s", got)
	}
	// Member names keep their RFC 8785 order among the renamed ones.
	if got := canonicalOf(t, `{"2`+canary+`":2,"1`+canary+`":1,"[REDACTED]":3}`, canary); got != `{"[REDACTED]":3,"[REDACTED]#2":1,"[REDACTED]#3":2}` {
		t.Fatalf("renamed members: %s", got)
	}
	// An empty known value redacts nothing.
	if got := canonicalOf(t, `{"a":"x"}`, ""); got != `{"a":"x"}` {
		t.Fatalf("empty known value: %s", got)
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRedact(t *testing.T) {
	in := map[string]any{
		"n":      json.Number("4.50"),
		"f":      1.5,
		"b":      true,
		"null":   nil,
		"token":  apiKey,
		"nested": []any{"ok", map[string]any{"auth": "Bearer " + "abc123DEF456ghi", "x": 2}},
		"known":  "prefix-hunter2-suffix",
	}
	orig, _ := json.Marshal(in)
	got := Redact(in, []string{"hunter2"})
	want := map[string]any{
		"n":      json.Number("4.50"),
		"f":      1.5,
		"b":      true,
		"null":   nil,
		"token":  Redacted,
		"nested": []any{"ok", map[string]any{"auth": Redacted, "x": 2}},
		"known":  Redacted,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Redact =\n%#v\nwant\n%#v", got, want)
	}
	if after, _ := json.Marshal(in); string(after) != string(orig) {
		t.Fatalf("Redact modified its input:\n%s\n%s", orig, after)
	}
}

func TestRedactOtherTypes(t *testing.T) {
	type creds struct {
		User  string            `json:"user"`
		Key   string            `json:"key"`
		Extra map[string]string `json:"extra"`
	}
	got := Redact(creds{User: "bob", Key: apiKey, Extra: map[string]string{"t": "ghp" + ghClassic}}, nil)
	want := map[string]any{"user": "bob", "key": Redacted, "extra": map[string]any{"t": Redacted}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("struct: %#v", got)
	}
	raw := Redact(json.RawMessage(`{"k":"`+apiKey+`","n":1}`), nil)
	if !reflect.DeepEqual(raw, map[string]any{"k": Redacted, "n": json.Number("1")}) {
		t.Fatalf("raw message: %#v", raw)
	}
	if got := Redact(make(chan int), nil); got != Redacted {
		t.Fatalf("unencodable value: %#v", got)
	}
	if got := Redact(json.RawMessage(`{bad`), nil); got != Redacted {
		t.Fatalf("invalid raw message: %#v", got)
	}
	if got := Redact([]string{"a", awsKeyID, awsSecret}, nil); !reflect.DeepEqual(got, []any{"a", Redacted, Redacted}) {
		t.Fatalf("string slice: %#v", got)
	}
}
