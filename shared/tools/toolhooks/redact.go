package toolhooks

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf16"
)

// Redacted replaces every redacted string.
const Redacted = "[REDACTED]"

// Redact returns a copy of v, a decoded JSON value, in which every secret
// string is replaced by Redacted. It never modifies v. Events and logs must
// never carry raw tool arguments, redacted or not: use ArgsHash for them;
// Redact is for the rare place that must show arguments to a person.
//
// The rules:
//
//   - A string equal to, or containing, one of the known secret values
//     resolved for this call is redacted (empty known values are ignored).
//   - A string containing a secret-shaped token is redacted: API keys
//     (sk-…), bearer credentials, long hex, JWTs, AWS access key ids, Slack
//     and GitHub tokens (see classify for the exact shapes).
//   - A secret-looking 40-character base64 run (the shape of an AWS secret
//     access key) is redacted when it, or a sibling string (another string
//     directly in the same object or array), holds an AWS access key id.
//   - The whole string is replaced, never just the secret inside it: a
//     partial replacement would leave the text around the secret in the
//     hash input, would make the hash depend on exactly where a detector
//     drew a secret's boundaries (so a detector fix would change hashes of
//     unchanged calls), and could leave a piece of a secret behind when a
//     detector saw only part of it. Two calls that differ only around a
//     secret therefore hash alike; that is the price of content-freedom.
//   - Object member names are kept, except a name that is itself secret by
//     the rules above, since RFC 0064 §E forbids raw key material in the hash
//     input wherever it sits. Such names become Redacted, Redacted+"#2", …
//     in the RFC 8785 order of the original names, skipping names already
//     taken.
//   - Numbers, booleans and null are kept; arrays and objects are walked.
//     A known secret passed as a JSON number is therefore not redacted:
//     resolved secrets are strings.
//
// v may hold the types encoding/json decodes into (map[string]any, []any,
// string, float64, json.Number, bool, nil) at any depth; any other value is
// redacted through its JSON encoding, and a value that cannot be encoded is
// replaced by Redacted as a whole.
func Redact(v any, known []string) any {
	return newRedactor(known).value(v)
}

// redactor holds the known secret values of one call.
type redactor struct {
	known []string
}

func newRedactor(known []string) *redactor {
	r := &redactor{}
	for _, k := range known {
		if k != "" && !slices.Contains(r.known, k) {
			r.known = append(r.known, k)
		}
	}
	return r
}

// redactString is the rule for a string on its own (a member name, or a
// value whose siblings are not known).
func (r *redactor) redactString(s string) bool {
	return r.classify(s).secret
}

// redactInContainer is the rule for a string directly inside an object or
// array whose string children include an AWS access key id (siblingKeyID).
func redactInContainer(v verdict, siblingKeyID bool) bool {
	return v.secret || siblingKeyID && v.awsSecret
}

func (r *redactor) value(v any) any {
	switch x := v.(type) {
	case nil, bool, float64, float32, int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64, json.Number:
		return x
	case string:
		if r.redactString(x) {
			return Redacted
		}
		return x
	case map[string]any:
		return r.object(x)
	case []any:
		return r.array(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return Redacted
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var t any
		if err := dec.Decode(&t); err != nil {
			return Redacted
		}
		return r.value(t)
	}
}

func (r *redactor) array(a []any) []any {
	verdicts := make([]verdict, len(a))
	keyID := false
	for i, e := range a {
		if s, ok := e.(string); ok {
			verdicts[i] = r.classify(s)
			keyID = keyID || verdicts[i].awsKeyID
		}
	}
	out := make([]any, len(a))
	for i, e := range a {
		if _, ok := e.(string); ok {
			if redactInContainer(verdicts[i], keyID) {
				out[i] = Redacted
			} else {
				out[i] = e
			}
			continue
		}
		out[i] = r.value(e)
	}
	return out
}

func (r *redactor) object(m map[string]any) map[string]any {
	verdicts := make(map[string]verdict)
	keyID := false
	for k, e := range m {
		if s, ok := e.(string); ok {
			v := r.classify(s)
			verdicts[k] = v
			keyID = keyID || v.awsKeyID
		}
	}
	type member struct {
		name  string
		value any
	}
	out := make(map[string]any, len(m))
	var secretNames []member
	for k, e := range m {
		if _, ok := e.(string); ok {
			if redactInContainer(verdicts[k], keyID) {
				e = Redacted
			}
		} else {
			e = r.value(e)
		}
		if r.redactString(k) {
			secretNames = append(secretNames, member{k, e})
			continue
		}
		out[k] = e
	}
	slices.SortFunc(secretNames, func(a, b member) int { return compareUTF16(a.name, b.name) })
	n := 1
	for _, mem := range secretNames {
		for {
			name := redactedName(n)
			n++
			if _, taken := out[name]; !taken {
				out[name] = mem.value
				break
			}
		}
	}
	return out
}

func redactedName(n int) string {
	if n == 1 {
		return Redacted
	}
	return Redacted + "#" + strconv.Itoa(n)
}

// compareUTF16 orders strings as RFC 8785 orders member names: by their
// UTF-16 code units.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}
