package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

func TestTenantConformance(t *testing.T) {
	storetest.RunTenantStore(t, func(t *testing.T) domain.TenantStore { return newStore(t) })
}

// Two Store values on one home behave like two processes.
func TestTenantConformanceTwoInstances(t *testing.T) {
	storetest.RunTenantStorePair(t, func(t *testing.T) (domain.TenantStore, domain.TenantStore) {
		a, b := twoStores(t)
		return a, b
	})
}

func TestCrossProcessTenantPuts(t *testing.T) {
	const n = 6
	home := t.TempDir()
	if won := runProcesses(t, n, "tenantput", "FILESTORE_TEST_HOME="+home); len(won) != n {
		t.Fatalf("%d of %d puts succeeded", len(won), n)
	}
	s := openStore(t, home)
	ctx := context.Background()
	if rev, err := s.TenantRevision(ctx); err != nil || rev != n {
		t.Fatalf("revision %d (%v) after %d puts from as many processes", rev, err, n)
	}
	if got, bad, err := s.ListTenantResources(ctx); err != nil || len(bad) > 0 || len(got) != n {
		t.Fatalf("listed %d uploads (%v), want %d", len(got), err, n)
	}
}

func TestTenantLayout(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	s := openStore(t, home)
	r := storetest.SampleTenantResource("Acme.co", domain.TenantKindTool, "Menu:list")
	if err := s.PutTenantResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, "tenants", "!acme%2eco", "Tool", "!menu%3alist.json")
	for _, p := range []string{filepath.Join(home, "tenants"), filepath.Dir(filepath.Dir(path)), filepath.Dir(path), path} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]os.FileMode{true: 0o700, false: 0o600}[fi.IsDir()]; fi.Mode().Perm() != want {
			t.Fatalf("%s mode %o, want %o", p, fi.Mode().Perm(), want)
		}
	}
	var f struct {
		Tenant, Kind, Name, UpdatedAt, Spec string
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Tenant != r.Tenant || f.Kind != r.Kind || f.Name != r.Name || f.Spec != string(r.Spec) || f.UpdatedAt != "2026-01-31T09:10:01.123456789Z" {
		t.Fatalf("file holds %+v", f)
	}
	data, _ = os.ReadFile(filepath.Join(home, "tenants", "revision.json"))
	if string(data) != `{"revision":1}`+"\n" {
		t.Fatalf("revision.json holds %q", data)
	}
	if err := s.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(home, "tenants"))
	if len(entries) != 1 || entries[0].Name() != "revision.json" {
		t.Fatalf("after the last delete tenants/ holds %v, want only revision.json", entries)
	}
}

func TestFileSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"menu-list_2", "menu-list_2"},
		{"menu:list", "menu%3alist"},
		{"Menu.List", "!menu%2e!list"},
		{"a.", "a%2e"},
		{"con", "%63on"},
		{"Con", "!con"},
		{"com1", "%63om1"},
		{"lpt9", "%6cpt9"},
		{"conx", "conx"},
		{"../x", "%2e%2e%2fx"},
		{"a\x00b\\c~d%e!", "a%00b%5cc%7ed%25e%21"},
	}
	for _, tc := range tests {
		if got := fileSafe(tc.in); got != tc.want {
			t.Errorf("fileSafe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := fileSafe("M" + strings.Repeat(":", 127))
	if len(long) != maxSafeName || !strings.Contains(long, "~") {
		t.Fatalf("long name %q (%d bytes)", long, len(long))
	}
}

// FuzzFileSafe checks that two different strings never share a file, even
// where names ignore case, and that no result is special to a file system.
func FuzzFileSafe(f *testing.F) {
	for _, s := range []string{"menu:list", "Menu:List", "con", "a.", "..", strings.Repeat(":", 128), strings.Repeat("A", 100)} {
		f.Add(s, strings.ToLower(s))
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		fa, fb := fileSafe(a), fileSafe(b)
		if a != b && strings.EqualFold(fa, fb) {
			t.Fatalf("%q and %q both map to %q", a, b, fa)
		}
		for _, s := range []string{fa, fb} {
			if len(s) > maxSafeName || strings.ContainsAny(s, `./\:`) || windowsDevice(strings.ToLower(s)) {
				t.Fatalf("unsafe file name %q", s)
			}
		}
	})
}

func TestTenantCorruptFiles(t *testing.T) {
	ctx := context.Background()
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	path := func(home string) string { return filepath.Join(home, "tenants", "acme", "Tool", "menu%3alist.json") }
	tests := []struct {
		name  string
		spoil func(t *testing.T, home string)
	}{
		{"not JSON", func(t *testing.T, home string) { write(t, path(home), `{"tenant":`) }},
		{"no spec", func(t *testing.T, home string) {
			write(t, path(home), `{"tenant":"acme","kind":"Tool","name":"menu:list"}`)
		}},
		{"spec not JSON", func(t *testing.T, home string) {
			write(t, path(home), `{"tenant":"acme","kind":"Tool","name":"menu:list","spec":"{"}`)
		}},
		{"another tenant's upload", func(t *testing.T, home string) {
			// A copy of acme's file placed under beta must not pass as beta's.
			data, _ := os.ReadFile(path(home))
			dir := filepath.Join(home, "tenants", "beta", "Tool")
			os.MkdirAll(dir, 0o700)
			write(t, filepath.Join(dir, "menu%3alist.json"), string(data))
		}},
		{"unescaped name", func(t *testing.T, home string) {
			data, _ := os.ReadFile(path(home))
			os.Remove(path(home))
			write(t, filepath.Join(home, "tenants", "acme", "Tool", "menu:list.json"), string(data))
		}},
		{"unknown kind", func(t *testing.T, home string) {
			os.MkdirAll(filepath.Join(home, "tenants", "acme", "Policy"), 0o700)
		}},
		{"stray file", func(t *testing.T, home string) {
			write(t, filepath.Join(home, "tenants", "acme", "Tool", "notes.txt"), "x")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, home := storeHolding(t, r, storetest.SampleTenantResource("zeta", domain.TenantKindSkill, "refunds"))
			tc.spoil(t, home)
			got, bad, err := s.ListTenantResources(ctx)
			if err != nil || !slices.ContainsFunc(got, func(x domain.TenantResource) bool { return x.Tenant == "zeta" }) {
				t.Fatalf("ListTenantResources: %v, %v: the readable upload must still be listed", got, err)
			}
			if len(bad) != 1 || !errors.Is(bad[0], domain.ErrCorrupt) {
				t.Fatalf("unreadable = %v, want one ErrCorrupt", bad)
			}
			if strings.Contains(bad[0].Error(), `"tenant":`) {
				t.Fatalf("error quotes file content: %v", bad[0])
			}
		})
	}
	// Temporary files a crash left behind are not uploads.
	s, home := storeHolding(t, r)
	write(t, filepath.Join(home, "tenants", "acme", "Tool", ".menu%3alist.json.tmp-0123456789abcdef"), "{")
	if got, bad, err := s.ListTenantResources(ctx); err != nil || len(bad) > 0 || len(got) != 1 {
		t.Fatalf("with a temporary file: %d uploads, %v %v", len(got), bad, err)
	}
}

func TestTenantCorruptRevision(t *testing.T) {
	ctx := context.Background()
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	s, home := storeHolding(t, r)
	revPath := filepath.Join(home, "tenants", "revision.json")
	write(t, revPath, "{garbage")
	if _, err := s.TenantRevision(ctx); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("TenantRevision: want ErrCorrupt, got %v", err)
	}
	r.Name = "other"
	if err := s.PutTenantResource(ctx, r); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("PutTenantResource: want ErrCorrupt, got %v", err)
	}
	if err := s.DeleteTenantResource(ctx, "acme", domain.TenantKindTool, "menu:list"); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("DeleteTenantResource: want ErrCorrupt, got %v", err)
	}
	if data, _ := os.ReadFile(revPath); string(data) != "{garbage" {
		t.Fatalf("the unreadable revision file was overwritten: %q", data)
	}
	if got, _, err := s.ListTenantResources(ctx); err != nil || len(got) != 1 || got[0].Name != "menu:list" {
		t.Fatalf("refused writes changed the uploads: %v %v", got, err)
	}
}

// TestTenantTraversalWritesNothing: refused keys leave no file anywhere
// under or beside the home.
func TestTenantTraversalWritesNothing(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	home := filepath.Join(parent, "home")
	s := openStore(t, home)
	for _, k := range [][3]string{
		{"../..", domain.TenantKindTool, "x"}, {"acme", "../../x", "x"}, {"acme", domain.TenantKindTool, "../../../x"},
		{"acme", domain.TenantKindTool, "a/../../../x"}, {"/tmp", domain.TenantKindTool, "x"},
	} {
		r := storetest.SampleTenantResource(k[0], k[1], k[2])
		if err := s.PutTenantResource(ctx, r); !errors.Is(err, domain.ErrInvalidID) {
			t.Fatalf("put %q: %v", k, err)
		}
		if err := s.DeleteTenantResource(ctx, k[0], k[1], k[2]); !errors.Is(err, domain.ErrInvalidID) {
			t.Fatalf("delete %q: %v", k, err)
		}
	}
	found := filesUnder(t, parent)
	if _, err := os.Stat(filepath.Join(home, "tenants")); err == nil || len(found) > 0 {
		t.Fatalf("refused writes left files: %v (tenants/: %v)", found, err)
	}
}

// storeHolding is a Store on a fresh home that holds rs.
func storeHolding(t *testing.T, rs ...domain.TenantResource) (*Store, string) {
	t.Helper()
	home := t.TempDir()
	s := openStore(t, home)
	for _, r := range rs {
		if err := s.PutTenantResource(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return s, home
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(fmt.Errorf("write %s: %w", path, err))
	}
}
