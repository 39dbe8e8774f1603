package httptool

import (
	"bytes"
	"encoding/json"
	"strings"
)

// redacted replaces the token wherever an upstream echoes it.
const redacted = "[REDACTED]"

// scrub removes the token from upstream text (an echoing or careless
// upstream must not hand the model the credential).
func scrub(s, token string) string {
	if token == "" || len(token) < 8 {
		return s
	}
	return strings.ReplaceAll(s, token, redacted)
}

// scrubBody removes the token from an upstream's answer, byte for byte
// and — when the answer is JSON — after decoding: a JSON string may spell
// the token with escapes (`\/` for '/', `\u0041` for 'A'), which a byte
// match misses and every JSON reader after us (the MCP server's
// structuredContent, a model, an SDK) turns back into the live token.
// A JSON answer with no token in it is returned byte for byte.
func scrubBody(text, token string) string {
	text = scrub(text, token)
	if token == "" || len(token) < 8 || !json.Valid([]byte(text)) || !strings.Contains(text, `\`) {
		return text // no escape, so the byte match saw every string
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber() // numbers come back as they were sent
	var v any
	if dec.Decode(&v) != nil {
		return text
	}
	v, changed := scrubValue(v, token)
	if !changed {
		return text
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return redacted // never hand back what could not be cleaned
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// scrubValue replaces the token in every decoded string of v, object keys
// included, and reports whether it found one.
func scrubValue(v any, token string) (any, bool) {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, token) {
			return strings.ReplaceAll(x, token, redacted), true
		}
		return x, false
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = scrubValue(e, token)
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			e, c := scrubValue(e, token)
			if strings.Contains(k, token) {
				k, c = strings.ReplaceAll(k, token, redacted), true
			}
			out[k] = e
			changed = changed || c
		}
		return out, changed
	}
	return v, false
}
