package bundle

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestResourcesListEveryResourceWithItsPlace(t *testing.T) {
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "demo-oidc"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "demo-oidc", "clientSecret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := LoadDir("../../examples/bundle", Options{Secrets: DirSecrets{Dir: secrets}})
	if err != nil {
		t.Fatal(err)
	}
	rs := b.Resources()
	want := len(b.OAuthApps) + len(b.Tools) + len(b.ToolGroups) + len(b.AccessPolicies) + len(b.Skills) + len(b.Models) + len(b.Agents) + len(b.Swarms) + len(b.Connectors)
	if len(rs) != want || want == 0 {
		t.Fatalf("%d resources, want %d", len(rs), want)
	}
	if !slices.IsSortedFunc(rs, func(x, y Resource) int {
		if x.Kind != y.Kind {
			return compareStrings(x.Kind, y.Kind)
		}
		return compareStrings(x.Name, y.Name)
	}) {
		t.Fatalf("not by kind then name: %+v", rs)
	}
	for _, r := range rs {
		if r.Name == "" || r.File == "" || r.Line < 1 {
			t.Errorf("%+v: no name or place", r)
		}
	}
	i := slices.IndexFunc(rs, func(r Resource) bool { return r.Kind == "Model" })
	if i < 0 || rs[i].File != "agents.yaml" || rs[i].Line != 19 && rs[i].Line != 20 {
		t.Fatalf("the Model: %+v", rs[i])
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
