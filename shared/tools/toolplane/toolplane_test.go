package toolplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
)

const planeBundle = `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: clock}
spec: {id: "native:now", name: now, description: the time, inputSchema: {type: object}, sourceId: native, transport: native}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: all}
spec: {selectors: [{source: "*"}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [all]}
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: b-runbook}
spec: {name: runbook, description: d, content: c, scope: tenant, tenantId: b}
`

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newPlane(t *testing.T, store domain.TenantStore, clk *clock) *Plane {
	t.Helper()
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(planeBundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), Config{Bundle: b, Tenants: store, Now: clk.now, CheckEvery: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func toolIDs(p *Plane, tenant string) string {
	_, m := p.Catalog().Manifest(map[string]any{"sub": "u", "tenant_id": tenant}, toolcatalog.Options{})
	var ids []string
	for _, e := range m {
		ids = append(ids, e.ToolID)
	}
	return strings.Join(ids, ",")
}

const orderTool = `{"id":"orders:list","name":"list_orders","description":"d","inputSchema":{"type":"object"},"sourceId":"orders","transport":"native"}`

// TestOtherProcessesSeeUploadsWithinCheckEvery: two planes on one store
// stand in for two Lambdas.
func TestOtherProcessesSeeUploadsWithinCheckEvery(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryTenants()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	p1, p2 := newPlane(t, store, clk), newPlane(t, store, clk)

	if _, err := p1.Upload(ctx, "a", domain.TenantKindTool, []byte(orderTool)); err != nil {
		t.Fatal(err)
	}
	if got := toolIDs(p1, "a"); got != "a/orders:list,native:now" {
		t.Fatalf("uploading process sees %q at once", got)
	}
	p2.Snapshot(ctx)
	if got := toolIDs(p2, "a"); got != "native:now" {
		t.Fatalf("other process before CheckEvery sees %q", got)
	}
	clk.add(10 * time.Second)
	p2.Snapshot(ctx)
	if got := toolIDs(p2, "a"); got != "a/orders:list,native:now" {
		t.Fatalf("other process after CheckEvery sees %q", got)
	}
	if got := toolIDs(p2, "b"); got != "native:now" {
		t.Fatalf("tenant b sees %q", got)
	}

	// A delete disappears the same way, and the access cache (5 min)
	// does not keep it alive past CheckEvery.
	if err := p1.Delete(ctx, "a", domain.TenantKindTool, "orders:list"); err != nil {
		t.Fatal(err)
	}
	clk.add(10 * time.Second)
	p2.Snapshot(ctx)
	if got := toolIDs(p2, "a"); got != "native:now" {
		t.Fatalf("after delete the other process sees %q", got)
	}
	if err := p1.Delete(ctx, "a", domain.TenantKindTool, "orders:list"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestUploadRules(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	p := newPlane(t, NewMemoryTenants(), clk)
	var ce *ConflictError
	var ve *bundle.ValidationError
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(strings.Replace(orderTool, "list_orders", "now", 1))); !errors.As(err, &ce) {
		t.Fatalf("a bundle tool's name: %v", err)
	}
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(orderTool)); err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(orderTool, "orders:list", "orders:all", 1)
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(other)); !errors.As(err, &ce) {
		t.Fatalf("same name, other id, same tenant: %v", err)
	}
	if _, err := p.Upload(ctx, "b", domain.TenantKindTool, []byte(other)); err != nil {
		t.Fatalf("same name in another tenant: %v", err)
	}
	if _, err := p.Upload(ctx, "b", domain.TenantKindSkill, []byte(`{"name":"runbook","description":"d","content":"c"}`)); !errors.As(err, &ce) {
		t.Fatalf("the bundle's tenant skill: %v", err)
	}
	plain := strings.Replace(orderTool, `"transport":"native"`, `"transport":"http","method":"GET","url":"http://127.0.0.1:9"`, 1)
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(strings.Replace(plain, "orders:list", "orders:x", 1))); !errors.As(err, &ve) || !strings.Contains(err.Error(), "must be https") {
		t.Fatalf("http url: %v", err)
	}
	if _, err := p.Upload(ctx, "../x", domain.TenantKindTool, []byte(orderTool)); !errors.Is(err, domain.ErrInvalidID) {
		t.Fatalf("bad tenant: %v", err)
	}
	// Replacing an upload keeps one copy.
	if _, err := p.Upload(ctx, "a", domain.TenantKindTool, []byte(strings.Replace(orderTool, `"description":"d"`, `"description":"v2"`, 1))); err != nil {
		t.Fatal(err)
	}
	if ups := p.Uploads(ctx, "a", domain.TenantKindTool); len(ups) != 1 || !strings.Contains(string(ups[0].Spec), "v2") {
		t.Fatalf("uploads = %+v", ups)
	}
}

// putFailing refuses every write.
type putFailing struct{ domain.TenantStore }

func (putFailing) PutTenantResource(context.Context, domain.TenantResource) error {
	return errors.New("disk full")
}

// TestUploadRefusals: what Upload refuses before it stores anything, and
// a store that refuses the write.
func TestUploadRefusals(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	tests := []struct {
		name       string
		store      domain.TenantStore // nil: uploads off
		kind, spec string
		wantIs     error  // errors.Is
		wantText   string // in the message
		validation bool   // a *bundle.ValidationError
	}{
		{name: "uploads off", kind: domain.TenantKindTool, spec: orderTool, wantIs: ErrUploadsOff},
		{name: "spec too large", store: NewMemoryTenants(), kind: domain.TenantKindSkill,
			spec:     `{"name":"big","description":"d","content":"` + strings.Repeat("x", domain.MaxTenantSpecBytes) + `"}`,
			wantText: "at most " + strconv.Itoa(domain.MaxTenantSpecBytes)},
		{name: "invalid skill", store: NewMemoryTenants(), kind: domain.TenantKindSkill, spec: `{"name":"s"}`, validation: true},
		{name: "invalid tool", store: NewMemoryTenants(), kind: domain.TenantKindTool, spec: `{"id":"orders:list"}`, validation: true},
		{name: "unknown kind", store: NewMemoryTenants(), kind: "prompt", spec: orderTool,
			wantText: `kind "prompt": want Skill or Tool`},
		{name: "store refuses the write", store: putFailing{NewMemoryTenants()}, kind: domain.TenantKindTool, spec: orderTool,
			wantText: "storing the upload: disk full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p *Plane
			if tc.store == nil {
				b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(planeBundle)}}, bundle.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if p, err = New(ctx, Config{Bundle: b, Now: clk.now}); err != nil {
					t.Fatal(err)
				}
			} else {
				p = newPlane(t, tc.store, clk)
			}
			name, err := p.Upload(ctx, "a", tc.kind, []byte(tc.spec))
			if err == nil || name != "" {
				t.Fatalf("Upload = %q, %v; want a refusal", name, err)
			}
			var ve *bundle.ValidationError
			switch {
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Fatalf("err %v, want %v", err, tc.wantIs)
			case tc.wantText != "" && !strings.Contains(err.Error(), tc.wantText):
				t.Fatalf("err %q, want it to say %q", err, tc.wantText)
			case tc.validation && !errors.As(err, &ve):
				t.Fatalf("err %T %v, want a *bundle.ValidationError", err, err)
			}
			if ups := p.Uploads(ctx, "a", tc.kind); len(ups) != 0 {
				t.Fatalf("a refused upload was stored: %+v", ups)
			}
		})
	}
}

func TestUploadLimit(t *testing.T) {
	ctx := context.Background()
	p := newPlane(t, NewMemoryTenants(), &clock{t: time.Unix(1_800_000_000, 0)})
	for i := range MaxPerTenant {
		body := `{"name":"s` + strconv.Itoa(i) + `","description":"d","content":"c"}`
		if _, err := p.Upload(ctx, "a", domain.TenantKindSkill, []byte(body)); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	if _, err := p.Upload(ctx, "a", domain.TenantKindSkill, []byte(`{"name":"one-more","description":"d","content":"c"}`)); !errors.Is(err, ErrLimit) {
		t.Fatalf("upload past the limit: %v", err)
	}
	if _, err := p.Upload(ctx, "a", domain.TenantKindSkill, []byte(`{"name":"s0","description":"new","content":"c"}`)); err != nil {
		t.Fatalf("replacing at the limit: %v", err)
	}
}

// failing wraps a store and fails its reads when down; unreadable are
// records its listing reports as unreadable.
type failing struct {
	domain.TenantStore
	down       bool
	unreadable []error
}

func (f *failing) ListTenantResources(ctx context.Context) ([]domain.TenantResource, []error, error) {
	got, bad, err := f.TenantStore.ListTenantResources(ctx)
	return got, append(bad, f.unreadable...), err
}

func (f *failing) TenantRevision(ctx context.Context) (int64, error) {
	if f.down {
		return 0, errors.New("store down")
	}
	return f.TenantStore.TenantRevision(ctx)
}

func TestBadUploadsAndStoreOutagesNeverTakeThePlaneDown(t *testing.T) {
	ctx := context.Background()
	mem := NewMemoryTenants()
	// A stored spec that no longer validates (rules tightened, or written
	// by hand) is skipped with a warning; the good one is served.
	_ = mem.PutTenantResource(ctx, domain.TenantResource{Tenant: "a", Kind: domain.TenantKindTool, Name: "bad:tool", Spec: []byte(`{"id":"bad:tool"}`), UpdatedAt: time.Now()})
	_ = mem.PutTenantResource(ctx, domain.TenantResource{Tenant: "a", Kind: domain.TenantKindTool, Name: "orders:list", Spec: []byte(orderTool), UpdatedAt: time.Now()})
	// And one the store cannot read at all: the plane still starts.
	st := &failing{TenantStore: mem, unreadable: []error{fmt.Errorf("tenant upload x: %w", domain.ErrCorrupt)}}
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	p := newPlane(t, st, clk)
	s := p.Snapshot(ctx)
	if len(s.Warnings) != 2 || !strings.Contains(strings.Join(s.Warnings, "\n"), "tenant a tool bad:tool") || !strings.Contains(strings.Join(s.Warnings, "\n"), "tenant upload x") {
		t.Fatalf("warnings = %q", s.Warnings)
	}
	if got := toolIDs(p, "a"); got != "a/orders:list,native:now" {
		t.Fatalf("served %q", got)
	}
	st.down = true
	clk.add(time.Minute)
	if got := p.Snapshot(ctx); got != s {
		t.Fatal("a store outage replaced the snapshot")
	}
	if _, err := p.Upload(ctx, "a", domain.TenantKindSkill, []byte(`{"name":"x","description":"d","content":"c"}`)); err == nil {
		t.Fatal("an upload succeeded while the store could not be read")
	}
}
