package toolhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
)

// errSecretName stops the fast path when a member name must be redacted:
// renaming members changes their order, so that case goes through the tree.
var errSecretName = errors.New("toolhooks: secret member name")

// errNotCanonical would mean jsontext produced something that is not RFC
// 8785 output; it guards the scanner against indexing past the input.
var errNotCanonical = errors.New("toolhooks: internal error: canonical form expected")

var redactedToken = []byte(`"` + Redacted + `"`)

// span is a string token of the canonical form, quotes included.
type span struct{ start, end int }

// pending is a string value directly inside the container being scanned.
type pending struct {
	span
	v verdict
}

// canonicalScanner walks RFC 8785 output, which has no whitespace, only the
// minimal string escapes and no duplicate names, and records the string
// values to replace.
type canonicalScanner struct {
	r *redactor
	// c is the canonical form as one string, so that each string token is
	// a substring of it rather than an allocation of its own.
	c       string
	edits   []span
	pending []pending // a stack: each open container owns a suffix
}

// redactCanonical returns canonical with every redacted string value
// replaced by "[REDACTED]"; the result is itself RFC 8785 output. It returns
// errSecretName when a member name must be redacted.
func (r *redactor) redactCanonical(canonical []byte) ([]byte, error) {
	sc := canonicalScanner{r: r, c: string(canonical), pending: make([]pending, 0, 32)}
	end, err := sc.value(0, true)
	if err != nil {
		return nil, err
	}
	if end != len(canonical) {
		return nil, errNotCanonical
	}
	if len(sc.edits) == 0 {
		return canonical, nil
	}
	// Container rules add their strings when the container closes, after
	// the edits of nested containers that come later in the text.
	slices.SortFunc(sc.edits, func(a, b span) int { return a.start - b.start })
	out := make([]byte, 0, len(canonical))
	at := 0
	for _, e := range sc.edits {
		out = append(out, canonical[at:e.start]...)
		out = append(out, redactedToken...)
		at = e.end
	}
	return append(out, canonical[at:]...), nil
}

// value scans the value at i and returns the index after it. A string is
// classified on its own when alone (the top-level value) and queued for its
// container's rule otherwise.
func (sc *canonicalScanner) value(i int, alone bool) (int, error) {
	if i >= len(sc.c) {
		return 0, errNotCanonical
	}
	switch sc.c[i] {
	case '{':
		return sc.container(i, true)
	case '[':
		return sc.container(i, false)
	case '"':
		end, s, err := sc.str(i)
		if err != nil {
			return 0, err
		}
		v := sc.r.classify(s)
		if alone {
			if v.secret {
				sc.edits = append(sc.edits, span{i, end})
			}
		} else {
			sc.pending = append(sc.pending, pending{span{i, end}, v})
		}
		return end, nil
	default: // number, true, false, null
		j := i
		for j < len(sc.c) && sc.c[j] != ',' && sc.c[j] != ']' && sc.c[j] != '}' {
			j++
		}
		if j == i {
			return 0, errNotCanonical
		}
		return j, nil
	}
}

func (sc *canonicalScanner) container(i int, object bool) (int, error) {
	closer := byte(']')
	if object {
		closer = '}'
	}
	base := len(sc.pending)
	i++
	for first := true; ; first = false {
		if i >= len(sc.c) {
			return 0, errNotCanonical
		}
		if sc.c[i] == closer {
			i++
			break
		}
		if !first {
			if sc.c[i] != ',' {
				return 0, errNotCanonical
			}
			i++
		}
		if object {
			end, name, err := sc.str(i)
			if err != nil {
				return 0, err
			}
			if sc.r.redactString(name) {
				return 0, errSecretName
			}
			if end >= len(sc.c) || sc.c[end] != ':' {
				return 0, errNotCanonical
			}
			i = end + 1
		}
		var err error
		if i, err = sc.value(i, false); err != nil {
			return 0, err
		}
	}
	children := sc.pending[base:]
	keyID := false
	for _, p := range children {
		keyID = keyID || p.v.awsKeyID
	}
	for _, p := range children {
		if redactInContainer(p.v, keyID) {
			sc.edits = append(sc.edits, p.span)
		}
	}
	sc.pending = sc.pending[:base]
	return i, nil
}

// str reads the string token at i and returns the index after it and its
// unescaped value.
func (sc *canonicalScanner) str(i int) (int, string, error) {
	if i >= len(sc.c) || sc.c[i] != '"' {
		return 0, "", errNotCanonical
	}
	escaped := false
	for j := i + 1; j < len(sc.c); j++ {
		switch sc.c[j] {
		case '\\':
			escaped = true
			j++ // the escaped byte is never the closing quote
		case '"':
			if !escaped {
				return j + 1, sc.c[i+1 : j], nil
			}
			raw, err := jsontext.AppendUnquote(nil, sc.c[i:j+1])
			if err != nil {
				return 0, "", errNotCanonical
			}
			return j + 1, string(raw), nil
		}
	}
	return 0, "", errNotCanonical
}

// redactCanonicalTree is the slow path for a member name that must be
// redacted: decode the canonical form, Redact it (which renames members),
// encode and canonicalize again. The canonical form is valid UTF-8 without
// duplicate names, so encoding/json decodes it losslessly; numbers stay
// json.Number text and are re-canonicalized to the same spelling.
func (r *redactor) redactCanonicalTree(canonical []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, errNotCanonical
	}
	b, err := json.Marshal(r.value(tree))
	if err != nil {
		return nil, errNotCanonical
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return nil, errNotCanonical
	}
	return v, nil
}
