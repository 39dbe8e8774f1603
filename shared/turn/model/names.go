package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// wireName is what Bedrock Converse and OpenAI accept as a tool name.
var wireName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Names maps the catalog's tool names (which may hold '/', '.', ':' or be
// long: tenant tools are "<tenant>/<id>") to the providers' tool-name
// alphabet and back. A name that already fits is kept as is, so the model
// sees the tool's own name wherever it can; any other becomes a readable
// prefix plus a hash, unique within the catalog. The mapping is built per
// step from the catalog, so it is reversible without storing anything.
type Names struct {
	toWire   map[string]string
	fromWire map[string]string
}

// NewNames maps names; it fails only on duplicate catalog names.
func NewNames(names []string) (*Names, error) {
	n := &Names{toWire: make(map[string]string, len(names)), fromWire: make(map[string]string, len(names))}
	// Names that fit claim their wire name first, so a mapped name can
	// never take a real tool's name.
	for _, name := range names {
		if _, dup := n.toWire[name]; dup {
			return nil, fmt.Errorf("tool names: %q is in the catalog twice", name)
		}
		if wireName.MatchString(name) {
			n.toWire[name], n.fromWire[name] = name, name
		} else {
			n.toWire[name] = ""
		}
	}
	for _, name := range names {
		if n.toWire[name] != "" {
			continue
		}
		w := mapped(name, 0)
		for i := 1; n.fromWire[w] != ""; i++ {
			w = mapped(name, i)
		}
		n.toWire[name], n.fromWire[w] = w, name
	}
	return n, nil
}

// mapped is name's readable prefix (invalid characters as '_') and 10 hex
// digits of SHA-256 over the name (and attempt, for the rare clash).
func mapped(name string, attempt int) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 64-11 {
			break
		}
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", name, attempt)))
	return b.String() + "_" + hex.EncodeToString(sum[:5])
}

// Wire is the provider-side name of a catalog tool ("" if not in it).
func (n *Names) Wire(name string) string { return n.toWire[name] }

// Tool is the catalog name of a provider-side name; ok is false for a name
// the model made up.
func (n *Names) Tool(wire string) (string, bool) {
	name, ok := n.fromWire[wire]
	return name, ok
}
