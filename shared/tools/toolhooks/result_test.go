package toolhooks

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", 1200)
	for _, tc := range []struct {
		name    string
		in      string
		limit   int
		wantLen int
		suffix  bool
	}{
		{"short stays", "boom", 0, 4, false},
		{"exactly the limit stays", strings.Repeat("x", 1000), 0, 1000, false},
		{"default limit 1000 runes", long, 0, 1000, true},
		{"custom limit", long, 50, 50, true},
		{"limit below the suffix", long, 5, 5, false},
		{"limit equal to the suffix: the suffix alone", long, 15, 15, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.limit)
			if n := utf8.RuneCountInString(got); n != tc.wantLen {
				t.Fatalf("%d runes, want %d", n, tc.wantLen)
			}
			if strings.HasSuffix(got, "... (truncated)") != tc.suffix {
				t.Fatalf("suffix: %q", got[len(got)-20:])
			}
			if !utf8.ValidString(got) {
				t.Fatal("cut inside a rune")
			}
		})
	}
	r := ErrorResult("", "", strings.Repeat("a", 2000), 100)
	raw, _ := json.Marshal(r)
	if r.Status != "error" || r.Error.Name != "Error" || r.Error.Code != CodeTool || !strings.Contains(string(raw), `"status":"error"`) {
		t.Fatalf("%s", raw)
	}
}

func compile(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://tool.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://tool.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidateArgs(t *testing.T) {
	s := compile(t, `{"type":"object","required":["channel","text"],"properties":{"channel":{"type":"string"},"text":{"type":"string","maxLength":5},"opts":{"type":"object","properties":{"count":{"type":"integer"}}}},"additionalProperties":false}`)
	for _, tc := range []struct {
		name, args, want string
	}{
		{"valid", `{"channel":"C1","text":"hi"}`, ""},
		{"missing property", `{"channel":"C1"}`, `missing required property "text"`},
		{"wrong type, nested", `{"channel":"C1","text":"hi","opts":{"count":"sk-secretvalue12345"}}`, "/opts/count"},
		{"too long", `{"channel":"C1","text":"sk-secret-canary-value"}`, "/text"},
		{"extra property", `{"channel":"C1","text":"hi","x-secret-name":1}`, "arguments at /: fails additionalProperties (the properties it takes: channel, opts, text)"},
		{"not JSON", `{"channel":`, "not valid JSON"},
		{"not an object", `[1]`, "fails type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			te := ValidateArgs(s, json.RawMessage(tc.args))
			if tc.want == "" {
				if te != nil {
					t.Fatalf("valid args refused: %+v", te)
				}
				return
			}
			if te == nil || te.Code != CodeInvalidArgs || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("got %+v, want a message with %q", te, tc.want)
			}
			if strings.Contains(te.Message, "secret") {
				t.Fatalf("an argument value leaked into %q", te.Message)
			}
		})
	}
	// A nested object without additional properties, and one that takes none.
	nested := compile(t, `{"type":"object","properties":{"opts":{"type":"object","properties":{"count":{"type":"integer"}},"additionalProperties":false}}}`)
	if te := ValidateArgs(nested, json.RawMessage(`{"opts":{"count":1,"z":2}}`)); te == nil || te.Message != "arguments at /opts: fails additionalProperties (the properties it takes: count)" {
		t.Fatalf("nested extra property: %+v", te)
	}
	none := compile(t, `{"type":"object","additionalProperties":false}`)
	if te := ValidateArgs(none, json.RawMessage(`{"x":1}`)); te == nil || te.Message != "arguments at /: fails additionalProperties (it takes no properties)" {
		t.Fatalf("a tool that takes no properties: %+v", te)
	}
	if ValidateArgs(nil, json.RawMessage(`{"x":1}`)) != nil {
		t.Fatal("no schema, no validation")
	}
}
