package toolplane

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
)

// revisions is an active bundle that a test moves: revision n adds tool
// extra<n> to planeBundle.
type revisions struct {
	mu      sync.Mutex
	cur     *bundle.Bundle
	byRev   map[string]*bundle.Bundle
	reads   int
	failing bool
}

func (r *revisions) parse(t *testing.T, n int) *bundle.Bundle {
	t.Helper()
	src := planeBundle
	for i := 1; i <= n; i++ {
		src += "---\napiVersion: agents.example.io/v1alpha1\nkind: Tool\nmetadata: {name: extra" + string(rune('0'+i)) + "}\nspec: {id: \"native:extra" + string(rune('0'+i)) +
			"\", name: extra" + string(rune('0'+i)) + ", description: d, inputSchema: {type: object}, sourceId: native, transport: native}\n"
	}
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(src)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b.Revision = "rev" + string(rune('0'+n))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byRev == nil {
		r.byRev = map[string]*bundle.Bundle{}
	}
	r.byRev[b.Revision] = b
	return b
}

func (r *revisions) set(b *bundle.Bundle) { r.mu.Lock(); r.cur = b; r.mu.Unlock() }

func (r *revisions) active(context.Context) (*bundle.Bundle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if r.failing {
		return nil, context.DeadlineExceeded
	}
	return r.cur, nil
}

func idsOf(p *Plane, s *Snapshot) string {
	_, m := p.CatalogOf(s).Manifest(map[string]any{"sub": "u"}, toolcatalog.Options{})
	var ids []string
	for _, e := range m {
		ids = append(ids, e.ToolID)
	}
	return strings.Join(ids, ",")
}

// TestPlaneFollowsTheActiveBundle: the routes' plane moves to a new active
// bundle within CheckEvery (a changeset's commit, seen by another
// process), keeps serving the previous one while the active bundle cannot
// be read, and a turn's step gets the plane at exactly the revision its
// step.config loaded — the new one at once, an older one as a side
// snapshot that does not move the routes back.
func TestPlaneFollowsTheActiveBundle(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	revs := &revisions{}
	r0, r1, r2 := revs.parse(t, 0), revs.parse(t, 1), revs.parse(t, 2)
	revs.set(r0)
	p, err := New(ctx, Config{Bundle: r0, Active: revs.active, Tenants: NewMemoryTenants(), Now: clk.now, CheckEvery: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(p, p.Snapshot(ctx)); got != "native:now" {
		t.Fatalf("at r0: %q", got)
	}
	revs.set(r1)
	if got := p.Snapshot(ctx).BundleRevision(); got != "rev0" {
		t.Fatalf("before CheckEvery the routes see %s", got)
	}
	clk.add(10 * time.Second)
	s := p.Snapshot(ctx)
	if s.BundleRevision() != "rev1" || idsOf(p, s) != "native:extra1,native:now" || p.Catalog() != p.CatalogOf(s) {
		t.Fatalf("after CheckEvery: %s %q", s.BundleRevision(), idsOf(p, s))
	}
	// An outage of the active bundle keeps the current revision.
	revs.mu.Lock()
	revs.failing = true
	revs.mu.Unlock()
	clk.add(10 * time.Second)
	if got := p.Snapshot(ctx).BundleRevision(); got != "rev1" {
		t.Fatalf("during an outage: %s", got)
	}
	revs.mu.Lock()
	revs.failing = false
	revs.mu.Unlock()

	// A step that loaded r2 (the head now) gets r2 at once, and the routes
	// move with it.
	revs.set(r2)
	s = p.SnapshotAt(ctx, r2)
	if s.BundleRevision() != "rev2" || p.Snapshot(ctx) != s || idsOf(p, s) != "native:extra1,native:extra2,native:now" {
		t.Fatalf("a step at the new head: %s %q", s.BundleRevision(), idsOf(p, s))
	}
	// A step still on r1 gets r1, with its own catalog; the routes stay on
	// r2, and asking again reuses the side snapshot.
	old := p.SnapshotAt(ctx, r1)
	if old.BundleRevision() != "rev1" || idsOf(p, old) != "native:extra1,native:now" || p.Snapshot(ctx).BundleRevision() != "rev2" {
		t.Fatalf("a step on the old revision: %s %q; routes %s", old.BundleRevision(), idsOf(p, old), p.Snapshot(ctx).BundleRevision())
	}
	if again := p.SnapshotAt(ctx, r1); again != old {
		t.Fatal("the side snapshot was built again")
	}
	// An upload reaches side snapshots too (they are rebuilt on the new
	// uploads revision).
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(orderTool)); err != nil {
		t.Fatal(err)
	}
	if s := p.SnapshotAt(ctx, r1); s == old || len(s.uploads) != 1 {
		t.Fatalf("the side snapshot after an upload: %d uploads", len(s.uploads))
	}
}
