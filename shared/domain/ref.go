package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ObjectRef names a bundle resource.
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String renders the ref as "Kind/name".
func (r ObjectRef) String() string { return r.Kind + "/" + r.Name }

// IsZero reports whether the ref is unset.
func (r ObjectRef) IsZero() bool { return r.Kind == "" && r.Name == "" }

// ParseObjectRef parses "Kind/name". The kind must be non-empty when
// defaultKind is empty; "name" alone takes defaultKind.
func ParseObjectRef(s, defaultKind string) (ObjectRef, error) {
	if s == "" {
		return ObjectRef{}, fmt.Errorf("empty object reference")
	}
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		if defaultKind == "" {
			return ObjectRef{}, fmt.Errorf("object reference %q: want Kind/name", s)
		}
		kind, name = defaultKind, s
	}
	if kind == "" || name == "" || strings.Contains(name, "/") {
		return ObjectRef{}, fmt.Errorf("object reference %q: want Kind/name", s)
	}
	return ObjectRef{Kind: kind, Name: name}, nil
}

// ObjectRefLike is the wire form of a reference: either "Kind/name" or
// {"kind": ..., "name": ...}. It unmarshals from both.
type ObjectRefLike struct{ ObjectRef }

// UnmarshalJSON accepts a string or an object with kind and name and no
// other field.
func (r *ObjectRefLike) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		ref, err := ParseObjectRef(s, "")
		if err != nil {
			return err
		}
		r.ObjectRef = ref
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Kind *string `json:"kind"`
			Name *string `json:"name"`
		}
		// Strict like every request body: a decoder's DisallowUnknownFields
		// does not reach into an UnmarshalJSON, so the object form refuses
		// unknown fields itself (the error names the field).
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return err
		}
		if o.Kind == nil || *o.Kind == "" || o.Name == nil || *o.Name == "" {
			return fmt.Errorf("object reference: want {\"kind\", \"name\"} both non-empty")
		}
		r.ObjectRef = ObjectRef{Kind: *o.Kind, Name: *o.Name}
		return nil
	}
	return fmt.Errorf("object reference: want a \"Kind/name\" string or a {\"kind\",\"name\"} object")
}

// MarshalJSON writes the object form.
func (r ObjectRefLike) MarshalJSON() ([]byte, error) { return json.Marshal(r.ObjectRef) }
