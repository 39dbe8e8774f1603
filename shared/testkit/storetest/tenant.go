package storetest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// RunTenantStore runs the domain.TenantStore conformance suite. open must
// return a fresh, empty store for each call.
func RunTenantStore(t *testing.T, open func(t *testing.T) domain.TenantStore) {
	for _, tc := range tenantTests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

// RunTenantStorePair runs the suite across two store instances on one
// backing storage, as two processes or two Lambdas share it: open must
// return two stores on a fresh, empty storage for each call. Every test of
// RunTenantStore runs with each call going to one instance or the other in
// turn, so a write through one must be what the other reads; further tests
// check that directly, and race writers through both.
func RunTenantStorePair(t *testing.T, open func(t *testing.T) (a, b domain.TenantStore)) {
	for _, tc := range tenantTests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t)
			tc.run(t, &tenantPair{a: a, b: b})
		})
	}
	pairTests := []struct {
		name string
		run  func(t *testing.T, a, b domain.TenantStore)
	}{
		{"SeesOtherInstance", testTenantSeesOtherInstance},
		{"ConcurrentPutsThroughBoth", testTenantConcurrentPutsThroughBoth},
	}
	for _, tc := range pairTests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := open(t)
			tc.run(t, a, b)
		})
	}
}

var tenantTests = []struct {
	name string
	run  func(t *testing.T, s domain.TenantStore)
}{
	{"Empty", testTenantEmpty},
	{"PutList", testTenantPutList},
	{"Replace", testTenantReplace},
	{"Delete", testTenantDelete},
	{"Revision", testTenantRevision},
	{"Invalid", testTenantInvalid},
	{"TenantIsolation", testTenantIsolation},
	{"Names", testTenantNames},
	{"MaxSpec", testTenantMaxSpec},
	{"Copies", testTenantCopies},
	{"ConcurrentPuts", testTenantConcurrentPuts},
}

// tenantPair sends each call to a or b in turn, per method.
type tenantPair struct {
	a, b                 domain.TenantStore
	put, del, list, revs atomic.Uint64
}

func (p *tenantPair) pick(n *atomic.Uint64) domain.TenantStore {
	if n.Add(1)%2 == 0 {
		return p.a
	}
	return p.b
}

func (p *tenantPair) PutTenantResource(ctx context.Context, r domain.TenantResource) error {
	return p.pick(&p.put).PutTenantResource(ctx, r)
}

func (p *tenantPair) DeleteTenantResource(ctx context.Context, tenant, kind, name string) error {
	return p.pick(&p.del).DeleteTenantResource(ctx, tenant, kind, name)
}

func (p *tenantPair) ListTenantResources(ctx context.Context) ([]domain.TenantResource, []error, error) {
	return p.pick(&p.list).ListTenantResources(ctx)
}

func (p *tenantPair) TenantRevision(ctx context.Context) (int64, error) {
	return p.pick(&p.revs).TenantRevision(ctx)
}

// SampleTenantResource is a valid upload with a spec that only a store
// keeping bytes verbatim gives back unchanged (spacing, key order, number
// forms, escapes, HTML characters and outer whitespace).
func SampleTenantResource(tenant, kind, name string) domain.TenantResource {
	spec := fmt.Sprintf(" {\"name\": %q,\n  \"z\": [1, 2.50, 1e3, -0], \"a\": \"<b>&amp;</b> \\u00e9\\ud83d\\ude00 \u00e9\",\t\"n\":null}\n", name)
	return domain.TenantResource{
		Tenant:    tenant,
		Kind:      kind,
		Name:      name,
		Spec:      json.RawMessage(spec),
		UpdatedAt: t0,
	}
}

func tenantKey(r domain.TenantResource) string { return r.Tenant + "|" + r.Kind + "|" + r.Name }

func compareTenantResources(a, b domain.TenantResource) int {
	return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}

// sameTenantResources checks that got is want in the port's order: keys
// and spec bytes equal, UpdatedAt within a millisecond.
func sameTenantResources(t *testing.T, got, want []domain.TenantResource, what string) {
	t.Helper()
	want = slices.Clone(want)
	slices.SortFunc(want, compareTenantResources)
	keys := func(rs []domain.TenantResource) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = tenantKey(r)
		}
		return out
	}
	if !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("%s: listed\n%q\nwant (in this order)\n%q", what, keys(got), keys(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Spec, w.Spec) {
			t.Fatalf("%s: %s: spec\n%q\nwant\n%q", what, tenantKey(w), g.Spec, w.Spec)
		}
		if d := g.UpdatedAt.Sub(w.UpdatedAt).Abs(); d >= time.Millisecond {
			t.Fatalf("%s: %s: updatedAt %v, want %v", what, tenantKey(w), g.UpdatedAt, w.UpdatedAt)
		}
	}
}

func listTenant(t *testing.T, s domain.TenantStore, what string) []domain.TenantResource {
	t.Helper()
	got, bad, err := s.ListTenantResources(context.Background())
	noErr(t, err, what+": ListTenantResources")
	if len(bad) > 0 {
		t.Fatalf("%s: ListTenantResources: %d unreadable uploads, the first: %v", what, len(bad), bad[0])
	}
	return got
}

func revision(t *testing.T, s domain.TenantStore, what string) int64 {
	t.Helper()
	rev, err := s.TenantRevision(context.Background())
	noErr(t, err, what+": TenantRevision")
	return rev
}

func putTenant(t *testing.T, s domain.TenantStore, r domain.TenantResource) {
	t.Helper()
	noErr(t, s.PutTenantResource(context.Background(), r), "PutTenantResource "+tenantKey(r))
}

func testTenantEmpty(t *testing.T, s domain.TenantStore) {
	if got := listTenant(t, s, "empty store"); len(got) != 0 {
		t.Fatalf("empty store lists %d uploads", len(got))
	}
	if rev := revision(t, s, "empty store"); rev != 0 {
		t.Fatalf("empty store: revision %d, want 0", rev)
	}
	err := s.DeleteTenantResource(context.Background(), "acme", domain.TenantKindTool, "menu:list")
	wantErr(t, err, domain.ErrNotFound, "DeleteTenantResource on an empty store")
	if rev := revision(t, s, "after a failed delete"); rev != 0 {
		t.Fatalf("a failed delete moved the revision to %d", rev)
	}
}

func testTenantPutList(t *testing.T, s domain.TenantStore) {
	tool := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	skill := SampleTenantResource("acme", domain.TenantKindSkill, "menu-planning")
	skill.Spec = json.RawMessage(`{"instructions":"plan"}`)
	skill.UpdatedAt = t1.In(time.FixedZone("CET", 3600))
	other := SampleTenantResource("Zeta.co", domain.TenantKindSkill, "a")
	other.Spec = json.RawMessage(`[1,"two",{"3":true}]`)
	other.UpdatedAt = time.Time{}
	scalar := SampleTenantResource("acme", domain.TenantKindTool, "a.b")
	scalar.Spec = json.RawMessage(`"just a string"`)
	want := []domain.TenantResource{tool, other, skill, scalar}
	for _, r := range want {
		putTenant(t, s, r)
	}
	sameTenantResources(t, listTenant(t, s, "after four puts"), want, "after four puts")
}

func testTenantReplace(t *testing.T, s domain.TenantStore) {
	r := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	putTenant(t, s, r)
	rev := revision(t, s, "after the first put")
	r.Spec = json.RawMessage(`{"replaced":true}`)
	r.UpdatedAt = t1
	putTenant(t, s, r)
	if got := revision(t, s, "after the replacement"); got <= rev {
		t.Fatalf("revision %d after a replacement, was %d", got, rev)
	}
	sameTenantResources(t, listTenant(t, s, "after the replacement"), []domain.TenantResource{r}, "after the replacement")
}

func testTenantDelete(t *testing.T, s domain.TenantStore) {
	ctx := context.Background()
	keep := SampleTenantResource("acme", domain.TenantKindSkill, "menu:list")
	gone := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	putTenant(t, s, keep)
	putTenant(t, s, gone)
	noErr(t, s.DeleteTenantResource(ctx, gone.Tenant, gone.Kind, gone.Name), "DeleteTenantResource")
	sameTenantResources(t, listTenant(t, s, "after the delete"), []domain.TenantResource{keep}, "after the delete")
	rev := revision(t, s, "after the delete")
	wantErr(t, s.DeleteTenantResource(ctx, gone.Tenant, gone.Kind, gone.Name), domain.ErrNotFound, "second DeleteTenantResource")
	if got := revision(t, s, "after the second delete"); got != rev {
		t.Fatalf("the second, failed, delete moved the revision from %d to %d", rev, got)
	}
	noErr(t, s.DeleteTenantResource(ctx, keep.Tenant, keep.Kind, keep.Name), "DeleteTenantResource of the last upload")
	if got := listTenant(t, s, "after deleting everything"); len(got) != 0 {
		t.Fatalf("lists %d uploads after deleting everything", len(got))
	}
	// The same key again is a new upload.
	putTenant(t, s, gone)
	sameTenantResources(t, listTenant(t, s, "after putting a deleted key again"), []domain.TenantResource{gone}, "after putting a deleted key again")
}

func testTenantRevision(t *testing.T, s domain.TenantStore) {
	ctx := context.Background()
	a := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	b := SampleTenantResource("beta", domain.TenantKindSkill, "menu:list")
	steps := []struct {
		name    string
		do      func() error
		advance bool
	}{
		{"put a", func() error { return s.PutTenantResource(ctx, a) }, true},
		{"put b", func() error { return s.PutTenantResource(ctx, b) }, true},
		{"put a again, unchanged", func() error { return s.PutTenantResource(ctx, a) }, true},
		{"put an invalid upload", func() error {
			bad := a
			bad.Spec = json.RawMessage(`{`)
			return s.PutTenantResource(ctx, bad)
		}, false},
		{"delete a", func() error { return s.DeleteTenantResource(ctx, a.Tenant, a.Kind, a.Name) }, true},
		{"delete a again", func() error { return s.DeleteTenantResource(ctx, a.Tenant, a.Kind, a.Name) }, false},
		{"delete with an invalid key", func() error { return s.DeleteTenantResource(ctx, "../acme", a.Kind, a.Name) }, false},
		{"delete b", func() error { return s.DeleteTenantResource(ctx, b.Tenant, b.Kind, b.Name) }, true},
		{"delete b again", func() error { return s.DeleteTenantResource(ctx, b.Tenant, b.Kind, b.Name) }, false},
		{"put a after it was deleted", func() error { return s.PutTenantResource(ctx, a) }, true},
	}
	rev := revision(t, s, "empty store")
	if rev != 0 {
		t.Fatalf("empty store: revision %d, want 0", rev)
	}
	for _, st := range steps {
		err := st.do()
		if st.advance {
			noErr(t, err, st.name)
		} else if err == nil {
			t.Fatalf("%s: succeeded", st.name)
		}
		got := revision(t, s, st.name)
		switch {
		case st.advance && got <= rev:
			t.Fatalf("%s: revision %d, was %d: want it to grow", st.name, got, rev)
		case !st.advance && got != rev:
			t.Fatalf("%s failed, yet the revision moved from %d to %d", st.name, rev, got)
		}
		rev = got
	}
}

func testTenantInvalid(t *testing.T, s domain.TenantStore) {
	ctx := context.Background()
	good := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	with := func(f func(*domain.TenantResource)) domain.TenantResource {
		r := good
		f(&r)
		return r
	}
	badKeys := []domain.TenantResource{
		with(func(r *domain.TenantResource) { r.Tenant = "" }),
		with(func(r *domain.TenantResource) { r.Tenant = ".." }),
		with(func(r *domain.TenantResource) { r.Tenant = "../acme" }),
		with(func(r *domain.TenantResource) { r.Tenant = "acme/../beta" }),
		with(func(r *domain.TenantResource) { r.Tenant = "/etc" }),
		with(func(r *domain.TenantResource) { r.Tenant = `acme\beta` }),
		with(func(r *domain.TenantResource) { r.Tenant = "acme#Tool#x" }),
		with(func(r *domain.TenantResource) { r.Tenant = "-acme" }),
		with(func(r *domain.TenantResource) { r.Tenant = "ac me" }),
		with(func(r *domain.TenantResource) { r.Tenant = "acme\x00" }),
		with(func(r *domain.TenantResource) { r.Tenant = "acme\n" }),
		with(func(r *domain.TenantResource) { r.Tenant = "a:b" }),
		with(func(r *domain.TenantResource) { r.Tenant = strings.Repeat("a", 65) }),
		with(func(r *domain.TenantResource) { r.Kind = "" }),
		with(func(r *domain.TenantResource) { r.Kind = "tool" }),
		with(func(r *domain.TenantResource) { r.Kind = "Policy" }),
		with(func(r *domain.TenantResource) { r.Kind = "../Tool" }),
		with(func(r *domain.TenantResource) { r.Name = "" }),
		with(func(r *domain.TenantResource) { r.Name = ".." }),
		with(func(r *domain.TenantResource) { r.Name = "../../etc/passwd" }),
		with(func(r *domain.TenantResource) { r.Name = "menu/list" }),
		with(func(r *domain.TenantResource) { r.Name = `menu\list` }),
		with(func(r *domain.TenantResource) { r.Name = ":list" }),
		with(func(r *domain.TenantResource) { r.Name = "menu#list" }),
		with(func(r *domain.TenantResource) { r.Name = "menu list" }),
		with(func(r *domain.TenantResource) { r.Name = "menu\x00" }),
		with(func(r *domain.TenantResource) { r.Name = "men\u00fc" }),
		with(func(r *domain.TenantResource) { r.Name = "a" + strings.Repeat(":", 128) }),
	}
	badSpecs := []domain.TenantResource{
		with(func(r *domain.TenantResource) { r.Spec = nil }),
		with(func(r *domain.TenantResource) { r.Spec = json.RawMessage(``) }),
		with(func(r *domain.TenantResource) { r.Spec = json.RawMessage(`{`) }),
		with(func(r *domain.TenantResource) { r.Spec = json.RawMessage(`{"a":1}{"b":2}`) }),
		with(func(r *domain.TenantResource) { r.Spec = json.RawMessage("\"\xff\"") }),
		with(func(r *domain.TenantResource) { r.Spec = json.RawMessage(`nope`) }),
		with(func(r *domain.TenantResource) {
			r.Spec = json.RawMessage(`"` + strings.Repeat("x", domain.MaxTenantSpecBytes-1) + `"`)
		}),
	}
	for _, r := range badKeys {
		t.Run(fmt.Sprintf("%q", tenantKey(r)), func(t *testing.T) {
			wantErr(t, s.PutTenantResource(ctx, r), domain.ErrInvalidID, "PutTenantResource")
			wantErr(t, s.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name), domain.ErrInvalidID, "DeleteTenantResource")
		})
	}
	for i, r := range badSpecs {
		t.Run(fmt.Sprintf("spec%d", i), func(t *testing.T) {
			if err := s.PutTenantResource(ctx, r); err == nil {
				t.Fatalf("PutTenantResource accepted spec %.40q (%d bytes)", r.Spec, len(r.Spec))
			}
		})
	}
	if got := listTenant(t, s, "after the refused writes"); len(got) != 0 {
		t.Fatalf("refused writes stored %d uploads: %q", len(got), tenantKey(got[0]))
	}
	if rev := revision(t, s, "after the refused writes"); rev != 0 {
		t.Fatalf("refused writes moved the revision to %d", rev)
	}
}

func testTenantIsolation(t *testing.T, s domain.TenantStore) {
	ctx := context.Background()
	a := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	a.Spec = json.RawMessage(`{"tenant":"acme"}`)
	b := SampleTenantResource("beta", domain.TenantKindTool, "menu:list")
	b.Spec = json.RawMessage(`{"tenant":"beta"}`)
	// A tenant id that is a prefix of another must not reach its uploads.
	ab := SampleTenantResource("acme-b", domain.TenantKindTool, "menu:list")
	ab.Spec = json.RawMessage(`{"tenant":"acme-b"}`)
	for _, r := range []domain.TenantResource{a, b, ab} {
		putTenant(t, s, r)
	}
	sameTenantResources(t, listTenant(t, s, "three tenants"), []domain.TenantResource{a, b, ab}, "three tenants")
	noErr(t, s.DeleteTenantResource(ctx, "acme", domain.TenantKindTool, "menu:list"), "delete in acme")
	sameTenantResources(t, listTenant(t, s, "after deleting acme's"), []domain.TenantResource{b, ab}, "after deleting acme's")
	wantErr(t, s.DeleteTenantResource(ctx, "acme", domain.TenantKindTool, "menu:list"), domain.ErrNotFound,
		"delete in acme again, with beta's still there")
	wantErr(t, s.DeleteTenantResource(ctx, "beta", domain.TenantKindSkill, "menu:list"), domain.ErrNotFound,
		"delete of beta's name under the other kind")
	b.Spec = json.RawMessage(`{"tenant":"beta","v":2}`)
	putTenant(t, s, b)
	sameTenantResources(t, listTenant(t, s, "after replacing beta's"), []domain.TenantResource{b, ab}, "after replacing beta's")
}

// testTenantNames puts names that a careless file or key layout would
// merge, truncate or misplace: tool ids with ':', names and tenants that
// differ only in case (one file on macOS and Windows unless escaped),
// trailing dots, device names, and the longest names allowed.
func testTenantNames(t *testing.T, s domain.TenantStore) {
	long := "M" + strings.Repeat(":", 127)
	names := []string{
		"menu:list", "Menu:List", "menu:List", "menu.list", "menu-list", "menu_list", "menu::list",
		"menu:list.", "a", "A", "con", "CON", "nul.json", "lpt1", "a.json", "json",
		long, "m" + strings.Repeat(":", 127), strings.Repeat("Z", 128), strings.Repeat("z", 128),
		strings.Repeat("a.", 64), "0" + strings.Repeat("_", 127),
	}
	tenants := []string{"acme", "Acme", "ACME", "a.", strings.Repeat("T", 64), "con"}
	var want []domain.TenantResource
	for i, tenant := range tenants {
		for j, name := range names {
			if i > 0 && j%3 != i%3 {
				continue // enough to mix every name with more than one tenant
			}
			kind := domain.TenantKindTool
			if j%2 == 1 {
				kind = domain.TenantKindSkill
			}
			r := SampleTenantResource(tenant, kind, name)
			r.Spec = json.RawMessage(fmt.Sprintf(`{"tenant":%q,"name":%q}`, tenant, name))
			want = append(want, r)
			putTenant(t, s, r)
		}
	}
	sameTenantResources(t, listTenant(t, s, "after the puts"), want, "after the puts")
	ctx := context.Background()
	noErr(t, s.DeleteTenantResource(ctx, "acme", domain.TenantKindTool, "menu:list"), "delete menu:list")
	noErr(t, s.DeleteTenantResource(ctx, "acme", domain.TenantKindTool, long), "delete the long name")
	want = slices.DeleteFunc(want, func(r domain.TenantResource) bool {
		return r.Tenant == "acme" && r.Kind == domain.TenantKindTool && (r.Name == "menu:list" || r.Name == long)
	})
	sameTenantResources(t, listTenant(t, s, "after two deletes"), want, "after two deletes")
}

func testTenantMaxSpec(t *testing.T, s domain.TenantStore) {
	r := SampleTenantResource(strings.Repeat("t", 64), domain.TenantKindSkill, strings.Repeat("n", 128))
	r.Spec = json.RawMessage(`"` + strings.Repeat("\\u00e9", (domain.MaxTenantSpecBytes-2)/6) + `"`)
	r.Spec = append(r.Spec[:len(r.Spec)-1], strings.Repeat(" ", domain.MaxTenantSpecBytes-len(r.Spec))+`"`...)
	if len(r.Spec) != domain.MaxTenantSpecBytes {
		t.Fatalf("test spec is %d bytes, want %d", len(r.Spec), domain.MaxTenantSpecBytes)
	}
	putTenant(t, s, r)
	sameTenantResources(t, listTenant(t, s, "after the put"), []domain.TenantResource{r}, "the largest spec")
}

func testTenantCopies(t *testing.T, s domain.TenantStore) {
	r := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	want := r
	want.Spec = slices.Clone(r.Spec)
	putTenant(t, s, r)
	// Changing what the caller passed or got back must not change the store.
	r.Spec[2] = 'X'
	for range 2 {
		got := listTenant(t, s, "after the caller changed its copy")
		sameTenantResources(t, got, []domain.TenantResource{want}, "after the caller changed its copy")
		got[0].Spec[2] = 'Y'
	}
}

func testTenantConcurrentPuts(t *testing.T, s domain.TenantStore) {
	concurrentPuts(t, func(int) domain.TenantStore { return s }, s)
}

func testTenantConcurrentPutsThroughBoth(t *testing.T, a, b domain.TenantStore) {
	concurrentPuts(t, func(i int) domain.TenantStore {
		if i%2 == 0 {
			return a
		}
		return b
	}, b)
}

// concurrentPuts races eight puts of different names (through the store
// via(i) picks) and checks that each landed and added one to the revision.
func concurrentPuts(t *testing.T, via func(i int) domain.TenantStore, read domain.TenantStore) {
	const n = 8
	putTenant(t, read, SampleTenantResource("acme", domain.TenantKindSkill, "before"))
	before := revision(t, read, "before the race")
	want := []domain.TenantResource{SampleTenantResource("acme", domain.TenantKindSkill, "before")}
	for i := range n {
		want = append(want, SampleTenantResource("acme", domain.TenantKindTool, fmt.Sprintf("racer:%d", i)))
	}
	errs := race(n, func(i int) error {
		return via(i).PutTenantResource(context.Background(), want[i+1])
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent puts: %v", err)
	}
	sameTenantResources(t, listTenant(t, read, "after the race"), want, "after the race")
	if after := revision(t, read, "after the race"); after != before+n {
		t.Fatalf("revision %d after %d concurrent puts from %d, want %d", after, n, before, before+n)
	}
}

func testTenantSeesOtherInstance(t *testing.T, a, b domain.TenantStore) {
	ctx := context.Background()
	if rev := revision(t, b, "b, empty"); rev != 0 {
		t.Fatalf("b: empty store revision %d", rev)
	}
	r := SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	putTenant(t, a, r)
	sameTenantResources(t, listTenant(t, b, "b after a put through a"), []domain.TenantResource{r}, "b after a put through a")
	revB := revision(t, b, "b after a put through a")
	if revB <= 0 {
		t.Fatalf("b sees revision %d after a put through a", revB)
	}
	if revA := revision(t, a, "a after its put"); revA != revB {
		t.Fatalf("a sees revision %d, b %d", revA, revB)
	}
	r.Spec = json.RawMessage(`{"v":2}`)
	putTenant(t, b, r)
	sameTenantResources(t, listTenant(t, a, "a after a replacement through b"), []domain.TenantResource{r}, "a after a replacement through b")
	revA := revision(t, a, "a after a replacement through b")
	if revA <= revB {
		t.Fatalf("a sees revision %d after a put through b, was %d", revA, revB)
	}
	noErr(t, b.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name), "delete through b")
	if got := listTenant(t, a, "a after a delete through b"); len(got) != 0 {
		t.Fatalf("a lists %d uploads after b deleted the only one", len(got))
	}
	if got := revision(t, a, "a after a delete through b"); got <= revA {
		t.Fatalf("a sees revision %d after a delete through b, was %d", got, revA)
	}
	wantErr(t, a.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name), domain.ErrNotFound, "delete through a of what b deleted")
}
