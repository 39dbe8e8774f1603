package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/domain"
)

// File is one bundle file.
type File struct {
	// Name is the bundle-relative path ("apps/slack.yaml") used in errors
	// and in the revision.
	Name string
	Data []byte
}

// SecretResolver returns key of the secret named name (the ref
// "Secret/<name>"). Its errors must never contain a secret value.
type SecretResolver interface {
	ResolveSecret(name, key string) (domain.Secret, error)
}

// Options are the loader's dependencies.
type Options struct {
	// LookupEnv resolves valueFrom.env; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Secrets resolves valueFrom.secretRef; nil makes every secretRef an
	// error naming its field.
	Secrets SecretResolver
}

// kindDecoder decodes and validates one resource of a kind and stores it in
// the bundle.
type kindDecoder func(r *res, d *document)

// kindRegistry maps kind to decoder.
func kindRegistry() map[string]kindDecoder {
	return map[string]kindDecoder{
		"OAuthApp":     decodeOAuthApp,
		"Tool":         decodeTool,
		"ToolGroup":    decodeToolGroup,
		"AccessPolicy": decodeAccessPolicy,
		"Skill":        decodeSkill,
		"Model":        decodeModel,
		"Agent":        decodeAgent,
		"Swarm":        decodeSwarm,
		"Connector":    decodeConnector,
	}
}

// document is one resource's envelope, checked, before its spec is
// decoded.
type document struct {
	Name     string
	Labels   map[string]string
	Spec     *yaml.Node // nil when absent or null
	SpecLine int        // line of the spec key, or of the document
}

type place struct {
	file string
	line int
}

type loader struct {
	opts     Options
	kinds    map[string]kindDecoder
	b        *Bundle
	problems []Problem
	warnings []Problem
	seen     map[domain.ObjectRef]place
	// callbacks remembers, in load order, the apps that set a callback
	// path and where, for the bundle-wide uniqueness check.
	callbacks []callbackUse
	// crossChecks run, in load order, once every document is read: the
	// checks of references between resources.
	crossChecks []func()
}

type callbackUse struct {
	app  *OAuthApp
	line int
	r    *res
}

// Parse validates files as one bundle. It returns every problem of the
// bundle at once in a *ValidationError; a bundle with any problem is
// refused. Files are read in name order whatever order they are given in.
func Parse(files []File, opts Options) (*Bundle, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	sorted := slices.Clone(files)
	slices.SortStableFunc(sorted, func(a, b File) int { return strings.Compare(a.Name, b.Name) })

	l := &loader{
		opts:  opts,
		kinds: kindRegistry(),
		b: &Bundle{
			OAuthApps:      map[string]*OAuthApp{},
			Tools:          map[string]*Tool{},
			ToolGroups:     map[string]*ToolGroup{},
			AccessPolicies: map[string]*AccessPolicy{},
			Skills:         map[string]*Skill{},
			Models:         map[string]*Model{},
			Agents:         map[string]*Agent{},
			Swarms:         map[string]*Swarm{},
			Connectors:     map[string]*Connector{},
		},
		seen: map[domain.ObjectRef]place{},
	}
	for i, f := range sorted {
		switch {
		case f.Name == "":
			l.problems = append(l.problems, Problem{Message: "a bundle file has an empty name"})
			continue
		case i > 0 && sorted[i-1].Name == f.Name:
			l.problems = append(l.problems, Problem{File: f.Name, Message: "file given twice"})
			continue
		}
		l.parseFile(f)
	}
	l.checkCallbackPaths()
	for _, check := range l.crossChecks {
		check()
	}

	sortProblems(l.problems)
	sortProblems(l.warnings)
	if len(l.problems) > 0 {
		return nil, &ValidationError{Problems: l.problems, Warnings: l.warnings}
	}
	l.b.Revision = revision(sorted)
	for _, w := range l.warnings {
		l.b.Warnings = append(l.b.Warnings, w.String())
	}
	return l.b, nil
}

// LoadDir reads every *.yaml and *.yml file under dir, recursively, and
// parses them as one bundle named by their slash-separated paths relative
// to dir. Hidden files and directories (names starting with ".") are
// skipped. A directory without any YAML file is an error.
func LoadDir(dir string, opts Options) (*Bundle, error) {
	var files []File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Hidden entries (.git, .github/workflows/*.yml, the ..data
		// links of a mounted ConfigMap) are not bundle resources.
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if !IsBundleFile(filepath.ToSlash(rel)) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, File{Name: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bundle: read %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("bundle: no *.yaml or *.yml files under %s", dir)
	}
	return Parse(files, opts)
}

// revision hashes every file's name and content, in name order, each
// length-prefixed so that moving bytes between a name and its content, or
// between files, changes the hash.
func revision(sorted []File) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	h.Write([]byte("agentauth-bundle-v1\x00"))
	for _, f := range sorted {
		put([]byte(f.Name))
		put(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (l *loader) parseFile(f File) {
	dec := yaml.NewDecoder(bytes.NewReader(f.Data))
	for {
		var doc yaml.Node
		err := decodeNode(dec, &doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			p := Problem{File: f.Name, Message: "invalid YAML: " + strings.TrimPrefix(oneLine(err.Error()), "yaml: ")}
			if m := yamlLine.FindStringSubmatch(oneLine(err.Error())); m != nil {
				p.Line, _ = strconv.Atoi(m[1])
				p.Message = "invalid YAML: " + m[2]
				if yamlParserError(m[2]) {
					// yaml.v3 reports parser (not scanner) errors with
					// a 0-based line: the start of the construct that
					// failed.
					p.Line++
				}
			}
			l.problems = append(l.problems, p)
			return
		}
		if len(doc.Content) == 0 || isNull(doc.Content[0]) {
			continue // an empty document
		}
		l.parseDocument(f.Name, doc.Content[0])
	}
}

// yamlParserError reports whether msg is one of the YAML parser's (as
// opposed to its scanner's) messages.
func yamlParserError(msg string) bool {
	switch msg {
	case "did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
		"did not find expected <document start>",
		"did not find expected <stream-start>",
		"did not find expected '-' indicator",
		"did not find expected key",
		"did not find expected node content",
		"found duplicate %YAML directive",
		"found duplicate %TAG directive",
		"found incompatible YAML document",
		"found undefined tag handle":
		return true
	}
	return false
}

// decodeNode turns a panic inside the YAML parser into an error: a bundle
// file must never crash a cold start.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("yaml: parser failed: %v", v)
		}
	}()
	return dec.Decode(n)
}

var kindRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// peek reads a top-level string without reporting anything, to label the
// resource before its problems are reported.
func peek(root *yaml.Node, keys ...string) string {
	n := root
	for _, k := range keys {
		n = deref(n)
		if n == nil || n.Kind != yaml.MappingNode {
			return ""
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if kn := deref(n.Content[i]); kn != nil && kn.Kind == yaml.ScalarNode && kn.Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return ""
	}
	return n.Value
}

func (l *loader) parseDocument(file string, root *yaml.Node) {
	r := &res{l: l, file: file, line: root.Line}
	kind, name := peek(root, "kind"), peek(root, "metadata", "name")
	decode, known := l.kinds[kind]
	validName := len(name) <= 63 && nameRE.MatchString(name)
	switch {
	case !kindRE.MatchString(kind):
	case validName:
		r.label = kind + "/" + name
	default:
		r.label = kind
	}

	root = deref(root)
	if root == nil {
		return
	}
	if root.Kind != yaml.MappingNode {
		r.errorf(root.Line, "", "a resource must be a YAML mapping with apiVersion, kind, metadata and spec, got %s", describe(root))
		return
	}
	top := r.mapping("", root.Line, root, "apiVersion", "kind", "metadata", "spec")

	if v := top.requireStr("apiVersion", ""); v.OK && v.Value != APIVersion {
		r.errorf(v.Line, "apiVersion", "%q is not supported; want %s", v.Value, APIVersion)
	}
	k := top.requireStr("kind", "")
	if k.OK && !known {
		r.errorf(k.Line, "kind", "unknown kind %q; known kinds: %s", k.Value, strings.Join(slices.Sorted(maps.Keys(l.kinds)), ", "))
	}

	meta := top.child("metadata", "name", "labels")
	n := meta.requireStr("name", "")
	if n.OK && !validName {
		r.errorf(n.Line, "metadata.name", "%q is not a valid name: want at most 63 characters of a-z, 0-9, '-' and '.', starting and ending with a letter or digit", n.Value)
	}
	d := &document{Name: name, Labels: meta.stringMap("labels")}
	d.Spec, d.SpecLine = top.get("spec")

	if !known {
		return
	}
	if validName {
		ref := domain.ObjectRef{Kind: kind, Name: name}
		if first, dup := l.seen[ref]; dup {
			r.errorf(n.Line, "metadata.name", "duplicate %s: already defined at %s:%d", ref, first.file, first.line)
		} else {
			l.seen[ref] = place{file: file, line: root.Line}
		}
	}
	// A resource with a bad or duplicate name is still decoded, so that
	// all of its problems are reported at once; the decoder stores only
	// the first of each name and the bundle is refused anyway.
	decode(r, d)
}

// OAuthApp returns the app ref names; ref.Kind must be "OAuthApp".
func (b *Bundle) OAuthApp(ref domain.ObjectRef) (*OAuthApp, bool) {
	if b == nil || ref.Kind != "OAuthApp" {
		return nil, false
	}
	a, ok := b.OAuthApps[ref.Name]
	return a, ok
}

// AppByCallbackPath returns the app whose redirect.callbackPath is path
// (exact match; the loader keeps callback paths unique).
func (b *Bundle) AppByCallbackPath(path string) (*OAuthApp, bool) {
	if b == nil || path == "" {
		return nil, false
	}
	for _, a := range b.OAuthApps {
		if a.Redirect.CallbackPath == path {
			return a, true
		}
	}
	return nil, false
}

// CallbackURL is the absolute redirect URI of the app: redirect.baseUrl,
// or serverBaseURL when that is empty, without trailing slashes, followed
// by redirect.callbackPath. It is empty when the app has no callback path
// (device code apps).
func (a *OAuthApp) CallbackURL(serverBaseURL string) string {
	if a.Redirect.CallbackPath == "" {
		return ""
	}
	base := a.Redirect.BaseURL
	if base == "" {
		base = serverBaseURL
	}
	return strings.TrimRight(base, "/") + a.Redirect.CallbackPath
}
