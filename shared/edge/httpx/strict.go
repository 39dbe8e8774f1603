package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
)

// encoding/json (v1) matches an object key to a struct field ignoring
// case and keeps the last of duplicate keys, so {"Auth":…} fills auth and
// {"auth":A,"auth":B} is read as B — where a proxy, a signature check or
// a log in front of us may have read A. encoding/json/v2 refuses both but
// needs GOEXPERIMENT=jsonv2, which this module's builds do not set. So
// Unmarshal decodes with v1 (its errors, its types) and then scans the
// bytes it accepted once more for the two things v1 lets through. An
// unknown field v1 refuses is found by the same scan, for its JSONPath
// and the field it likely means: v1's error names neither.

// errTrailing is data after the one JSON value of a body.
var errTrailing = errors.New("unexpected data after the JSON object")

// KeyError is an object key the strict decoder refuses: a duplicate (at
// any depth, in a map or free-form value too), or a key that names no
// field of the struct the object decodes into (Unknown) — a field's name
// in another case among them. Key is as decoded, cut to a few dozen
// bytes; Path is the JSONPath of the object holding it ("$" for the
// body); Want is the field an unknown key most likely means
// (domain.Suggest: the same name in another case, else a near miss), ""
// when none is near.
type KeyError struct {
	Key     string
	Path    string
	Unknown bool
	Want    string
}

func (e *KeyError) Error() string {
	switch {
	case e.Want != "":
		return fmt.Sprintf("unknown field %s at %s (did you mean %q?)", strconv.Quote(e.Key), e.Path, e.Want)
	case e.Unknown:
		return fmt.Sprintf("unknown field %s at %s", strconv.Quote(e.Key), e.Path)
	}
	return fmt.Sprintf("duplicate key %s at %s", strconv.Quote(e.Key), e.Path)
}

// Unmarshal decodes data strictly into v by DecodeJSON's rules: one JSON
// value, no unknown field at any depth, no field name in another case, no
// duplicate key at any depth, nothing after the value. JSONProblem
// describes its errors without the input. On error v may be partly
// filled; use it only when Unmarshal returns nil.
func Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if key, ok := unknownField(err); ok {
			// The decoder read the value whole before filling v, so it
			// is well-formed JSON: find where the key is and what it
			// likely means.
			if ke := locateUnknown(data[:dec.InputOffset()], reflect.TypeOf(v), key); ke != nil {
				return ke
			}
		}
		return err
	}
	// Whatever follows the value is refused, even "]" or "}" that
	// Decoder.More would not report.
	end := dec.InputOffset()
	if len(bytes.TrimSpace(data[end:])) > 0 {
		return errTrailing
	}
	return checkKeys(data[:end], reflect.TypeOf(v))
}

// checkKeys scans value, which encoding/json has accepted (so it is one
// well-formed JSON value), for the keys Unmarshal refuses; t is the Go
// type it was decoded into.
func checkKeys(value []byte, t reflect.Type) error {
	// Eight levels cover every route's body without growing the path.
	s := keyScan{data: value, path: make([]pathStep, 0, 8)}
	return s.value(t)
}

// unknownField is the key of encoding/json's unknown-field error, which
// has no type of its own: `json: unknown field "scope"`.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	key, err := strconv.Unquote(rest)
	return key, err == nil
}

// locateUnknown is the *KeyError of the first key named key that no field
// of its object's struct has, scanning value (well-formed JSON) decoded
// into t; a duplicate or a key in another case met first is returned as
// checkKeys returns it; nil when the key is not found (it was refused
// inside a type that decodes itself from a form the scan does not read).
func locateUnknown(value []byte, t reflect.Type, key string) *KeyError {
	s := keyScan{data: value, path: make([]pathStep, 0, 8), unknown: []byte(key)}
	var ke *KeyError
	if errors.As(s.value(t), &ke) {
		return ke
	}
	return nil
}

// keyScan walks well-formed JSON by hand: the json.Decoder.Token API
// would allocate for every token, this allocates only for keys with
// escapes, objects of many keys and the error.
type keyScan struct {
	data []byte
	pos  int
	path []pathStep
	// unknown is the key encoding/json refused as an unknown field
	// (locateUnknown): found in a struct's object, it is an error.
	unknown []byte
}

// pathStep is one step from the body to the object being scanned: an
// object member (key) or an array element (index).
type pathStep struct {
	key   []byte
	index int
}

// manyKeys is the size of an object above which duplicates are found
// with a map rather than by comparing with every earlier key.
const manyKeys = 16

func (s *keyScan) value(t reflect.Type) error {
	s.space()
	switch s.data[s.pos] {
	case '{':
		return s.object(t)
	case '[':
		return s.array(t)
	case '"':
		s.pos = stringEnd(s.data, s.pos)
	default: // a number, true, false or null
		for s.pos < len(s.data) && !scalarEnd(s.data[s.pos]) {
			s.pos++
		}
	}
	return nil
}

func (s *keyScan) object(t reflect.Type) error {
	t = decodedAs(t)
	// The struct's JSON names, read once per object rather than per key.
	var inline [manyKeys]jsonField
	var fields []jsonField
	if t != nil && t.Kind() == reflect.Struct {
		fields = appendFields(inline[:0], t, 0)
	}
	s.pos++ // {
	var few [manyKeys][]byte
	seen := few[:0]
	var many map[string]struct{}
	for {
		s.space()
		switch s.data[s.pos] {
		case '}':
			s.pos++
			return nil
		case ',':
			s.pos++
			s.space()
		}
		start := s.pos
		s.pos = stringEnd(s.data, s.pos)
		key := keyText(s.data[start:s.pos])
		switch {
		case many != nil:
			if _, dup := many[string(key)]; dup {
				return s.keyError(key, false, "")
			}
			many[string(key)] = struct{}{}
		default:
			for _, k := range seen {
				if bytes.Equal(k, key) {
					return s.keyError(key, false, "")
				}
			}
			if len(seen) < manyKeys {
				seen = append(seen, key)
				break
			}
			many = make(map[string]struct{}, 2*manyKeys)
			for _, k := range seen {
				many[string(k)] = struct{}{}
			}
			many[string(key)] = struct{}{}
		}
		child, want, known := member(t, fields, key)
		switch {
		case want != "":
			return s.keyError(key, true, want)
		case !known && s.unknown != nil && bytes.Equal(key, s.unknown):
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.name
			}
			return s.keyError(key, true, domain.Suggest(string(key), names))
		}
		s.space()
		s.pos++ // :
		s.path = append(s.path, pathStep{key: key})
		if err := s.value(child); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
}

func (s *keyScan) array(t reflect.Type) error {
	t = decodedAs(t)
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	s.pos++ // [
	for i := 0; ; i++ {
		s.space()
		switch s.data[s.pos] {
		case ']':
			s.pos++
			return nil
		case ',':
			s.pos++
		}
		s.path = append(s.path, pathStep{index: i})
		if err := s.value(elem); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
	}
}

func (s *keyScan) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *keyScan) keyError(key []byte, unknown bool, want string) error {
	return &KeyError{Key: cut(string(key)), Path: s.render(), Unknown: unknown, Want: want}
}

// render is the JSONPath of the object being scanned: $.turn.auth,
// $.items[2], $.origin["a b"].
func (s *keyScan) render() string {
	var b strings.Builder
	b.WriteByte('$')
	for _, st := range s.path {
		switch {
		case st.key == nil:
			fmt.Fprintf(&b, "[%d]", st.index)
		case plainName(st.key):
			b.WriteByte('.')
			b.Write(st.key)
		default:
			b.WriteString("[" + strconv.Quote(cut(string(st.key))) + "]")
		}
	}
	return b.String()
}

// maxKeyInError bounds a key quoted in an error: a key is a name, but a
// caller's map keys can be long.
const maxKeyInError = 64

func cut(k string) string {
	if len(k) <= maxKeyInError {
		return k
	}
	n := maxKeyInError
	for n > 0 && !utf8.RuneStart(k[n]) {
		n--
	}
	return k[:n] + "…"
}

func plainName(k []byte) bool {
	if len(k) == 0 || len(k) > maxKeyInError {
		return false
	}
	for i, c := range k {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// stringEnd is the offset just after the JSON string that starts at
// data[i] (a '"').
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

func scalarEnd(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// keyText is a key as encoding/json decodes it: escapes resolved and
// invalid UTF-8 replaced by U+FFFD, so that "\u0061uth" is "auth" and two
// keys of different invalid bytes are one key, as they are in a map.
func keyText(quoted []byte) []byte {
	raw := quoted[1 : len(quoted)-1]
	plain := true // ASCII without escapes, nearly every key: one pass
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain || bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var k string
	if json.Unmarshal(quoted, &k) != nil {
		return raw // not reached: encoding/json accepted this string
	}
	return []byte(k)
}

// jsonUnmarshaler is the interface of a type that decodes itself.
var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// decodedAs is the type whose rules apply to a JSON object or array
// decoded into t: pointers followed; nil (only duplicates checked below)
// for an interface, and for a type that decodes itself (json.RawMessage)
// unless it is a struct, whose field names it most likely reads
// (domain.ObjectRefLike's object form).
func decodedAs(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil || t.Kind() == reflect.Interface:
		return nil
	case t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(jsonUnmarshaler):
		return nil
	}
	return t
}

// member is the type a member key of an object decoded into t (whose
// JSON fields are fields when it is a struct) decodes into, nil when
// unknown; or the field name key differs from only in case (want), which
// encoding/json would have filled. known is false only for a key that
// names no field of a struct.
func member(t reflect.Type, fields []jsonField, key []byte) (child reflect.Type, want string, known bool) {
	switch {
	case t == nil:
		return nil, "", true
	case t.Kind() == reflect.Map:
		return t.Elem(), "", true
	case t.Kind() != reflect.Struct:
		return nil, "", true
	}
	for _, f := range fields {
		if f.name == string(key) {
			return f.typ, "", true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, string(key)) {
			return nil, f.name, false
		}
	}
	return nil, "", false
}

// jsonField is a struct field as encoding/json names it.
type jsonField struct {
	name string
	typ  reflect.Type
}

// maxEmbedding bounds the walk into embedded structs (a struct may embed
// a pointer to itself).
const maxEmbedding = 8

// appendFields appends t's fields by encoding/json's naming: the json
// tag's name, else the Go name; "-" and unexported fields skipped;
// untagged embedded structs' fields promoted (after t's own, so that a
// name t declares itself comes first).
func appendFields(dst []jsonField, t reflect.Type, depth int) []jsonField {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, emb, ok := jsonName(f)
		switch {
		case !ok:
		case emb != nil:
			embedded = append(embedded, emb)
		default:
			dst = append(dst, jsonField{name: name, typ: f.Type})
		}
	}
	if depth < maxEmbedding {
		for _, e := range embedded {
			dst = appendFields(dst, e, depth+1)
		}
	}
	return dst
}

// jsonName is f's JSON member name, or the struct whose fields f
// promotes (embedded), or ok false when encoding/json ignores f — its
// typeFields rules.
func jsonName(f reflect.StructField) (name string, embedded reflect.Type, ok bool) {
	ft := f.Type
	if f.Anonymous {
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !f.IsExported() && ft.Kind() != reflect.Struct {
			return "", nil, false
		}
	} else if !f.IsExported() {
		return "", nil, false
	}
	tag := jsonTag(f.Tag)
	if tag == "-" {
		return "", nil, false
	}
	name, _, _ = strings.Cut(tag, ",")
	if !validTagName(name) {
		name = ""
	}
	if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
		return "", ft, true
	}
	if name == "" {
		name = f.Name
	}
	return name, nil, true
}

// jsonTag is f.Tag.Get("json") without its unquoting for a tag that
// starts json:"…" with no escape in the value, as nearly every tag does
// (Get, which unquotes, was half of the key check's time).
func jsonTag(tag reflect.StructTag) string {
	if rest, ok := strings.CutPrefix(string(tag), `json:"`); ok {
		if end := strings.IndexByte(rest, '"'); end >= 0 && strings.IndexByte(rest[:end], '\\') < 0 {
			return rest[:end]
		}
	}
	return tag.Get("json")
}

// validTagName is encoding/json's isValidTag: a tag name it uses (else
// the Go name counts).
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		case c < utf8.RuneSelf && strings.IndexByte(tagPunctuation, byte(c)) >= 0:
		case c < utf8.RuneSelf || !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// tagPunctuation is what encoding/json allows in a tag name besides
// letters and digits (backslash and quotes are reserved).
const tagPunctuation = "!#$%&()*+-./:;<=>?@[]^_{|}~ "
