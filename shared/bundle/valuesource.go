package bundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/domain"
)

// valueSource resolves the ValueSource at parent.key: exactly one of
// {value}, {valueFrom: {env}}, {valueFrom: {secretRef: {ref, key}}}.
// Messages name the field, the variable or the secret reference, never the
// value.
func (r *res) valueSource(parent *mapping, key string, secret bool) (string, bool) {
	n, line := parent.get(key)
	p := parent.field(key)
	if n == nil {
		if !parent.bad {
			r.errorf(line, p, "required")
		}
		return "", false
	}
	vs := r.mapping(p, line, n, "value", "valueFrom")
	if vs.bad {
		return "", false
	}
	value := vs.str("value")
	from := vs.child("valueFrom", "env", "secretRef")
	switch {
	case value.Present && from.present:
		r.errorf(vs.line, p, "set only one of value and valueFrom")
		return "", false
	case value.Present:
		return r.literalValue(vs, value, secret)
	case !from.present:
		r.errorf(vs.line, p, "needs one of value, valueFrom.env or valueFrom.secretRef")
		return "", false
	case from.bad:
		return "", false
	}
	return r.valueFrom(from)
}

// literalValue is {value}: a non-empty string, warned about when it is a
// secret.
func (r *res) literalValue(vs *mapping, value scalar, secret bool) (string, bool) {
	if !value.OK {
		return "", false
	}
	if value.Value == "" {
		r.errorf(value.Line, vs.field("value"), "must not be empty")
		return "", false
	}
	if secret {
		r.warnf(value.Line, vs.field("value"), "a literal secret in the bundle is for tests and demos; use valueFrom (env or secretRef) (spec 2.4 rule 4)")
	}
	return value.Value, true
}

// valueFrom resolves {valueFrom: …}: exactly one of env and secretRef.
func (r *res) valueFrom(from *mapping) (string, bool) {
	env := from.str("env")
	refNode, refLine := from.get("secretRef")
	switch {
	case env.Present && refNode != nil:
		r.errorf(from.line, from.path, "set only one of env and secretRef")
		return "", false
	case env.Present:
		return r.envValue(from, env)
	case refNode == nil:
		r.errorf(from.line, from.path, "needs env or secretRef")
		return "", false
	}
	return r.secretRefValue(r.mapping(from.field("secretRef"), refLine, refNode, "ref", "key"))
}

// envValue is {valueFrom: {env}}: the value of a set, non-empty variable.
func (r *res) envValue(from *mapping, env scalar) (string, bool) {
	if !env.OK {
		return "", false
	}
	if env.Value == "" {
		r.errorf(env.Line, from.field("env"), "must name an environment variable")
		return "", false
	}
	v, ok := r.l.opts.LookupEnv(env.Value)
	switch {
	case !ok:
		r.errorf(env.Line, from.field("env"), "environment variable %q is not set", env.Value)
		return "", false
	case v == "":
		r.errorf(env.Line, from.field("env"), "environment variable %q is empty", env.Value)
		return "", false
	}
	return v, true
}

// secretRefValue is {valueFrom: {secretRef: {ref: Secret/<name>, key}}}:
// the non-empty value the configured SecretResolver holds.
func (r *res) secretRefValue(sr *mapping) (string, bool) {
	ref := sr.requireStr("ref", "")
	k := sr.requireStr("key", "")
	if !ref.OK || !k.OK {
		return "", false
	}
	name, ok := secretName(ref.Value)
	if !ok {
		r.errorf(ref.Line, sr.field("ref"), "%q: want Secret/<name>", ref.Value)
		return "", false
	}
	if r.l.opts.Secrets == nil {
		r.errorf(ref.Line, sr.path, "no secret store configured to resolve %s key %q", ref.Value, k.Value)
		return "", false
	}
	v, err := r.l.opts.Secrets.ResolveSecret(name, k.Value)
	if err != nil {
		r.errorf(ref.Line, sr.path, "%s key %q: %v", ref.Value, k.Value, err)
		return "", false
	}
	if v.IsZero() {
		r.errorf(ref.Line, sr.path, "%s key %q is empty", ref.Value, k.Value)
		return "", false
	}
	return v.Reveal(), true
}

// secretName is the name in a secretRef's ref, which must be spelt out as
// Secret/<name> (no bare name: a ref names its kind).
func secretName(ref string) (string, bool) {
	kind, name, found := strings.Cut(ref, "/")
	if !found || kind != "Secret" || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// maxOptionValues bounds the values in spec.options, aliases counted each
// time they are used, so a YAML alias bomb cannot blow up the load.
const maxOptionValues = 10000

// jsonValue converts n to a JSON-shaped value: map[string]any, []any,
// string, bool, nil, int64 or float64.
func jsonValue(r *res, p string, n *yaml.Node, budget *int) (any, bool) {
	n = deref(n)
	if n == nil {
		return nil, true
	}
	if *budget--; *budget < 0 {
		if *budget == -1 {
			r.errorf(n.Line, p, "too large: more than %d values (aliases count each time they are used)", maxOptionValues)
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		obj := make(map[string]any, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				r.errorf(n.Content[i].Line, p, "keys must be strings")
				ok = false
				continue
			}
			kp := fieldPath(p, k.Value)
			if _, dup := obj[k.Value]; dup {
				r.errorf(k.Line, kp, "duplicate key")
				ok = false
				continue
			}
			v, vok := jsonValue(r, kp, n.Content[i+1], budget)
			ok = ok && vok
			obj[k.Value] = v
		}
		return obj, ok
	case yaml.SequenceNode:
		arr := make([]any, 0, len(n.Content))
		ok := true
		for i, c := range n.Content {
			v, vok := jsonValue(r, indexPath(p, i), c, budget)
			ok = ok && vok
			arr = append(arr, v)
		}
		return arr, ok
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			r.errorf(n.Line, p, "not a valid %s value", n.ShortTag())
			return nil, false
		}
		switch x := v.(type) {
		case nil, string, bool:
			return x, true
		case int:
			return int64(x), true
		case int64:
			return x, true
		case uint64:
			return float64(x), true
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				r.errorf(n.Line, p, "%s cannot be represented in JSON", n.Value)
				return nil, false
			}
			return x, true
		case time.Time:
			return n.Value, true
		}
		return n.Value, true
	}
	r.errorf(n.Line, p, "unsupported YAML value")
	return nil, false
}

// DirSecrets resolves secretRefs from a local directory: key K of
// Secret/N is the file <Dir>/N/K, one trailing newline trimmed. Names and
// keys are checked so that a ref cannot leave Dir, and files are opened
// through an os.Root so that symlinks cannot either.
type DirSecrets struct{ Dir string }

var _ SecretResolver = DirSecrets{}

var secretPart = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func validSecretPart(s string) bool {
	return s != "." && s != ".." && secretPart.MatchString(s)
}

// maxSecretFile bounds what ResolveSecret reads.
const maxSecretFile = 1 << 20

// ResolveSecret reads <Dir>/name/key. Its errors never hold the content.
func (s DirSecrets) ResolveSecret(name, key string) (domain.Secret, error) {
	if !validSecretPart(name) {
		return domain.Secret{}, fmt.Errorf("secret name %q: want [A-Za-z0-9._-]+, not . or ..: %w", name, domain.ErrInvalidID)
	}
	if !validSecretPart(key) {
		return domain.Secret{}, fmt.Errorf("secret key %q: want [A-Za-z0-9._-]+, not . or ..: %w", key, domain.ErrInvalidID)
	}
	if s.Dir == "" {
		return domain.Secret{}, errors.New("no secrets directory configured")
	}
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return domain.Secret{}, fmt.Errorf("open secrets directory: %w", err)
	}
	defer root.Close()
	f, err := root.Open(name + "/" + key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return domain.Secret{}, fmt.Errorf("secret file %s/%s: %w", name, key, domain.ErrNotFound)
		}
		return domain.Secret{}, fmt.Errorf("secret file %s/%s: %w", name, key, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return domain.Secret{}, fmt.Errorf("read secret file %s/%s: %w", name, key, err)
	}
	if len(data) > maxSecretFile {
		return domain.Secret{}, fmt.Errorf("secret file %s/%s: larger than %d bytes", name, key, maxSecretFile)
	}
	v := string(data)
	if strings.HasSuffix(v, "\r\n") {
		v = v[:len(v)-2]
	} else {
		v = strings.TrimSuffix(v, "\n")
	}
	return domain.NewSecret(v), nil
}
