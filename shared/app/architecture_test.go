package app

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/agentauth/agentauth/"

// pkgImports maps every package directory under shared/ (relative to the
// module root, e.g. "shared/oauth") to the module packages and SDK
// packages its non-test files import.
func pkgImports(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	out := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(root, "shared"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "testdata") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if _, ok := out[rel]; !ok {
			out[rel] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case strings.HasPrefix(p, module):
				out[rel] = append(out[rel], strings.TrimPrefix(p, module))
			case strings.Contains(p, "."):
				out[rel] = append(out[rel], "ext:"+p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// layer names the layer of a package directory.
func layer(pkg string) string {
	switch {
	case pkg == "shared/domain":
		return "domain"
	case pkg == "shared/config":
		return "config"
	case pkg == "shared/app":
		return "app"
	case pkg == "shared/edge/lambdaentry":
		// The Lambda main: config → backends → app.Build → lambda.Start.
		return "entry"
	case pkg == "shared/turn/model/openai", pkg == "shared/turn/model/bedrock":
		// The model adapters call providers over the network.
		return "adapter"
	case pkg == "shared/oauth", pkg == "shared/bundle", pkg == "shared/changeset", strings.HasPrefix(pkg, "shared/tools/"), strings.HasPrefix(pkg, "shared/turn"):
		return "pure"
	case strings.HasPrefix(pkg, "shared/aws/"), strings.HasPrefix(pkg, "shared/local/"):
		return "adapter"
	case strings.HasPrefix(pkg, "shared/edge/"):
		return "edge"
	case strings.HasPrefix(pkg, "shared/observe/"):
		return "observe"
	case strings.HasPrefix(pkg, "shared/testkit/"):
		return "testkit"
	}
	return "unknown"
}

// TestLayers: the dependency rule of docs/architecture.md, on every
// package's imports.
func TestLayers(t *testing.T) {
	may := map[string]map[string]bool{
		"domain":  {},
		"pure":    {"domain": true, "pure": true, "observe": true},
		"observe": {"domain": true},
		"config":  {"domain": true, "pure": true, "edge": true},
		"adapter": {"domain": true, "pure": true, "adapter": true, "observe": true},
		"edge":    {"domain": true, "pure": true, "edge": true, "observe": true},
		"app":     {"domain": true, "pure": true, "adapter": true, "edge": true, "observe": true, "config": true},
		"entry":   {"domain": true, "adapter": true, "edge": true, "observe": true, "config": true, "app": true},
		"testkit": {"domain": true, "pure": true, "adapter": true, "edge": true, "observe": true, "config": true, "app": true, "testkit": true},
	}
	imports := pkgImports(t)
	if len(imports) < 30 {
		t.Fatalf("found %d packages under shared/: has the tree moved?", len(imports))
	}
	for pkg, deps := range imports {
		from := layer(pkg)
		if from == "unknown" {
			t.Errorf("%s is in no layer of docs/architecture.md", pkg)
			continue
		}
		for _, dep := range deps {
			if ext, ok := strings.CutPrefix(dep, "ext:"); ok {
				aws := strings.HasPrefix(ext, "github.com/aws/aws-sdk-go-v2")
				if aws && from != "adapter" && from != "testkit" && from != "entry" {
					t.Errorf("%s (%s) imports the AWS SDK (%s): only aws/… may", pkg, from, ext)
				}
				if from == "domain" {
					t.Errorf("domain imports %s: it is standard library only", ext)
				}
				continue
			}
			if strings.HasPrefix(dep, "functions/") || strings.HasPrefix(dep, "cmd/") || strings.HasPrefix(dep, "infra/") || strings.HasPrefix(dep, "test/") {
				t.Errorf("%s imports %s: nothing imports entry points or tests", pkg, dep)
				continue
			}
			to := layer(dep)
			if !may[from][to] {
				t.Errorf("%s (%s) imports %s (%s): against the rule in docs/architecture.md", pkg, from, dep, to)
			}
		}
	}
}

// TestMapListsEveryPackage: docs/architecture.md names every package, and
// no package that is gone.
func TestMapListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	imports := pkgImports(t)
	for pkg := range imports {
		if !strings.Contains(string(doc), "| `"+pkg+"` |") {
			t.Errorf("docs/architecture.md does not list %s", pkg)
		}
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `shared/"); ok {
			pkg := "shared/" + rest[:strings.Index(rest, "`")]
			if _, ok := imports[pkg]; !ok {
				t.Errorf("docs/architecture.md lists %s, which does not exist", pkg)
			}
		}
	}
}
