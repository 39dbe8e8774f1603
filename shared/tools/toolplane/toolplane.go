// Package toolplane is one process's view of the tools it serves: the
// bundle's tools, groups, policies and skills plus every tenant's run-time
// uploads, built into the discovery index (behind the caching catalog),
// the skill index and the table of invocable tools.
//
// Uploads live in the store (domain.TenantStore); a process polls the
// store's uploads revision at most every CheckEvery and rebuilds when it
// moved, so an upload or delete made by any process is seen everywhere
// within CheckEvery, and at once by the process that made it. A tenant's
// uploads are always tenant scoped: its tools are seen only by callers of
// the same tenant (toolcatalog), its skills only by those callers whose
// allow list names them (skills). It must never let an upload change what
// another tenant sees.
package toolplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
)

// Defaults and limits.
const (
	// DefaultCheckEvery is how often a process looks for other processes'
	// uploads.
	DefaultCheckEvery = 10 * time.Second
	// MaxPerTenant bounds one tenant's uploads of each kind.
	MaxPerTenant = 500
)

// Config of a Plane.
type Config struct {
	// Bundle is the bundle the plane starts on.
	Bundle *bundle.Bundle
	// Active, when set, is the active bundle now (a git bundle's head,
	// which changesets move): the plane follows it, checked with the
	// uploads every CheckEvery. nil: Bundle for good.
	Active func(ctx context.Context) (*bundle.Bundle, error)
	// Tenants stores uploads; nil: uploads are off (the admin routes
	// answer 501).
	Tenants domain.TenantStore
	// TenantClaim is the claim path of the caller's tenant (tenant_id).
	TenantClaim string
	// CheckEvery (DefaultCheckEvery when 0).
	CheckEvery time.Duration
	// AllowPrivateUpstreams lets uploaded http tools use http:// URLs
	// (and, in httptool, private addresses): local development only.
	AllowPrivateUpstreams bool
	Now                   func() time.Time
	Log                   *slog.Logger
}

// Entry is an invocable tool of a snapshot.
type Entry struct {
	Tool   *bundle.Tool
	Tenant string // the uploading tenant; empty for a bundle tool
}

// Snapshot is what the plane serves at one revision. Read only.
type Snapshot struct {
	// Revision is the bundle revision and the uploads revision.
	Revision string
	Skills   *skills.Index
	// Tools by manifest tool id.
	Tools map[string]Entry
	// Warnings are uploads that could not be used (logged at rebuild).
	Warnings []string
	// Agents are, by bundle Agent name, the manifest ids of the tools the
	// agent's tool selection picks among the bundle's and the uploads'
	// (a turn's catalog is this ∩ what the turn's principal may see).
	Agents map[string]map[string]bool
	// ToolTimeouts are, by bundle Agent name, how long one of the agent's
	// tool calls may run (its limits.toolTimeoutSeconds).
	ToolTimeouts map[string]time.Duration

	tenantRev int64
	uploads   []domain.TenantResource
	bundle    *bundle.Bundle
	// catalog is a side snapshot's own (SnapshotAt); the current one's is
	// the plane's.
	catalog *toolcatalog.Catalog
}

// BundleRevision is the revision of the bundle the snapshot is built on.
func (s *Snapshot) BundleRevision() string { return s.bundle.Revision }

// Plane is safe for concurrent use.
type Plane struct {
	cfg     Config
	catalog *toolcatalog.Catalog
	snap    atomic.Pointer[Snapshot]

	refresh   sync.Mutex // one rebuild at a time
	lastCheck atomic.Int64
	// parsed caches uploads already validated, by key and spec, so a
	// rebuild parses only what changed (guarded by refresh).
	parsed map[string]parsedUpload
	// side are snapshots of other bundle revisions than the current one
	// (SnapshotAt), the most recent last (guarded by refresh).
	side []*Snapshot
}

// maxSide bounds the side snapshots: revisions turns still run on while
// a commit takes effect.
const maxSide = 3

// parsedUpload is one validated upload (skill or tool) or why it is not.
type parsedUpload struct {
	spec  string
	skill *bundle.Skill
	tool  *bundle.Tool
	err   error
}

// ErrUploadsOff is returned by Upload and Delete without a TenantStore.
var ErrUploadsOff = errors.New("tenant uploads are not enabled on this server")

// New builds the plane from the bundle and the stored uploads.
func New(ctx context.Context, cfg Config) (*Plane, error) {
	if cfg.Bundle == nil {
		return nil, errors.New("toolplane: a bundle is required")
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = DefaultCheckEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = "tenant_id"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Plane{cfg: cfg, parsed: map[string]parsedUpload{}}
	var uploads []domain.TenantResource
	var unreadable []error
	var rev int64
	if cfg.Tenants != nil {
		var err error
		if rev, err = cfg.Tenants.TenantRevision(ctx); err != nil {
			return nil, fmt.Errorf("toolplane: reading the uploads revision: %w", err)
		}
		if uploads, unreadable, err = cfg.Tenants.ListTenantResources(ctx); err != nil {
			return nil, fmt.Errorf("toolplane: listing tenant uploads: %w", err)
		}
	}
	s, ix, err := p.build(cfg.Bundle, rev, uploads, unreadable)
	if err != nil {
		return nil, err
	}
	s.logWarnings(ctx, cfg.Log)
	p.catalog = toolcatalog.New(ix, s.Revision, toolcatalog.Settings{Now: cfg.Now, TenantClaim: cfg.TenantClaim})
	p.snap.Store(s)
	p.lastCheck.Store(cfg.Now().UnixNano())
	return p, nil
}

// Catalog is the caching discovery catalog (replaced indexes included).
func (p *Plane) Catalog() *toolcatalog.Catalog { return p.catalog }

// Snapshot returns the current snapshot, first looking for other
// processes' uploads when CheckEvery has passed. A store that cannot be
// read keeps the current snapshot (logged) rather than failing the call.
func (p *Plane) Snapshot(ctx context.Context) *Snapshot {
	if (p.cfg.Tenants != nil || p.cfg.Active != nil) && p.cfg.Now().UnixNano()-p.lastCheck.Load() >= int64(p.cfg.CheckEvery) && p.refresh.TryLock() {
		func() {
			defer p.refresh.Unlock()
			p.lastCheck.Store(p.cfg.Now().UnixNano())
			if err := p.reloadLocked(ctx, false); err != nil {
				p.cfg.Log.WarnContext(ctx, "tool plane not reloaded; serving the previous bundle and uploads", "err", err)
			}
		}()
	}
	return p.snap.Load()
}

// Reload rebuilds from the store now if its revision moved.
func (p *Plane) Reload(ctx context.Context) error {
	p.refresh.Lock()
	defer p.refresh.Unlock()
	p.lastCheck.Store(p.cfg.Now().UnixNano())
	return p.reloadLocked(ctx, false)
}

func (p *Plane) reloadLocked(ctx context.Context, force bool) error {
	cur := p.snap.Load()
	b := cur.bundle
	if p.cfg.Active != nil {
		nb, err := p.cfg.Active(ctx)
		if err != nil {
			return fmt.Errorf("the active bundle: %w", err)
		}
		b = nb
	}
	rev, uploads := cur.tenantRev, cur.uploads
	var unreadable []error
	if p.cfg.Tenants != nil {
		var err error
		if rev, err = p.cfg.Tenants.TenantRevision(ctx); err != nil {
			return err
		}
		if force || rev != cur.tenantRev {
			if uploads, unreadable, err = p.cfg.Tenants.ListTenantResources(ctx); err != nil {
				return err
			}
		}
	}
	if !force && rev == cur.tenantRev && b.Revision == cur.bundle.Revision {
		return nil
	}
	s, ix, err := p.build(b, rev, uploads, unreadable)
	if err != nil {
		return err
	}
	p.snap.Store(s)
	p.catalog.Update(ix, s.Revision)
	if b.Revision != cur.bundle.Revision {
		p.cfg.Log.InfoContext(ctx, "tool plane on a new bundle revision", "revision", s.Revision, "previous", cur.Revision)
	} else {
		p.cfg.Log.InfoContext(ctx, "tenant uploads loaded", "revision", s.Revision, "uploads", len(uploads), "unusable", len(s.Warnings))
	}
	s.logWarnings(ctx, p.cfg.Log)
	return nil
}

// SnapshotAt is the plane at bundle b: the current snapshot when it is
// built on b's revision — after checking the active bundle, which a turn's
// step may have seen move first — else a snapshot of b with the current
// uploads, kept among the few side snapshots, with its own catalog (see
// Snapshot.Catalog). A turn's step asks for the revision its step.config
// loaded, so its tools come from exactly that revision.
func (p *Plane) SnapshotAt(ctx context.Context, b *bundle.Bundle) *Snapshot {
	if cur := p.snap.Load(); cur.bundle.Revision == b.Revision {
		return cur
	}
	p.refresh.Lock()
	defer p.refresh.Unlock()
	if p.cfg.Active != nil {
		p.lastCheck.Store(p.cfg.Now().UnixNano())
		if err := p.reloadLocked(ctx, false); err != nil {
			p.cfg.Log.WarnContext(ctx, "tool plane not reloaded; serving the previous bundle and uploads", "err", err)
		}
	}
	cur := p.snap.Load()
	if cur.bundle.Revision == b.Revision {
		return cur
	}
	for _, s := range p.side {
		if s.bundle.Revision == b.Revision && s.tenantRev == cur.tenantRev {
			return s
		}
	}
	s, ix, err := p.build(b, cur.tenantRev, cur.uploads, nil)
	if err != nil {
		p.cfg.Log.WarnContext(ctx, "tool plane at an older bundle revision not built; serving the current one", "revision", b.Revision, "err", err)
		return cur
	}
	s.catalog = toolcatalog.New(ix, s.Revision, toolcatalog.Settings{Now: p.cfg.Now, TenantClaim: p.cfg.TenantClaim})
	p.side = append(p.side, s)
	if len(p.side) > maxSide {
		p.side = p.side[1:]
	}
	return s
}

// CatalogOf is the discovery catalog of the plane at snapshot s.
func (p *Plane) CatalogOf(s *Snapshot) *toolcatalog.Catalog {
	if s.catalog != nil {
		return s.catalog
	}
	return p.catalog
}

func (s *Snapshot) logWarnings(ctx context.Context, log *slog.Logger) {
	for _, w := range s.Warnings {
		log.WarnContext(ctx, "tenant upload skipped", "problem", w)
	}
}

// build makes a snapshot and its discovery index. An upload that no
// longer validates, or collides with the bundle, is skipped with a
// warning: one bad upload never takes the plane down.
func (p *Plane) build(b *bundle.Bundle, tenantRev int64, uploads []domain.TenantResource, unreadable []error) (*Snapshot, *discovery.Index, error) {
	s := &Snapshot{Revision: fmt.Sprintf("%s+%d", b.Revision, tenantRev), Tools: map[string]Entry{}, tenantRev: tenantRev, uploads: uploads, bundle: b}
	for _, err := range unreadable {
		s.Warnings = append(s.Warnings, err.Error())
	}
	dc := b.DiscoveryConfig()
	for id, t := range b.Tools {
		s.Tools[id] = Entry{Tool: t}
	}
	var sk []skills.Skill
	bundleSkills := map[[2]string]bool{}
	for _, name := range sortedKeys(b.Skills) {
		x := b.Skills[name]
		sk = append(sk, skills.Skill{Name: x.SkillName, Description: x.Description, Content: x.Content, Scope: skills.Scope(x.Scope), TenantID: x.TenantID})
		bundleSkills[[2]string{x.TenantID, x.SkillName}] = true
	}
	parsed := make(map[string]parsedUpload, len(uploads))
	for _, u := range uploads {
		pu := p.parse(u)
		parsed[u.Tenant+"\x00"+u.Kind+"\x00"+u.Name] = pu
		switch u.Kind {
		case domain.TenantKindSkill:
			x, err := pu.skill, pu.err
			switch {
			case err != nil:
				s.Warnings = append(s.Warnings, fmt.Sprintf("tenant %s skill %s: %v", u.Tenant, u.Name, err))
			case x.SkillName != u.Name || bundleSkills[[2]string{u.Tenant, x.SkillName}]:
				s.Warnings = append(s.Warnings, fmt.Sprintf("tenant %s skill %s: name taken by the bundle or not the stored key", u.Tenant, u.Name))
			default:
				sk = append(sk, skills.Skill{Name: x.SkillName, Description: x.Description, Content: x.Content, Scope: skills.ScopeTenant, TenantID: u.Tenant})
			}
		case domain.TenantKindTool:
			t, err := pu.tool, pu.err
			if err == nil && t.ID != u.Name {
				err = errors.New("the stored key is not the tool id")
			}
			if err != nil {
				s.Warnings = append(s.Warnings, fmt.Sprintf("tenant %s tool %s: %v", u.Tenant, u.Name, err))
				continue
			}
			dt := t.DiscoveryTool()
			dt.Tenant = u.Tenant
			dc.Tools = append(dc.Tools, dt)
			s.Tools[discovery.TenantToolID(u.Tenant, t.ID)] = Entry{Tool: t, Tenant: u.Tenant}
		default:
			s.Warnings = append(s.Warnings, fmt.Sprintf("tenant %s %s %s: unknown kind", u.Tenant, u.Kind, u.Name))
		}
	}
	// An agent's selection is a group of the index, so it selects exactly
	// as a ToolGroup would. Its id cannot be a ToolGroup's (a name has no
	// '/'), so no policy can grant it.
	for _, name := range sortedKeys(b.Agents) {
		dc.Groups = append(dc.Groups, b.Agents[name].Tools.Group(agentGroupID(name), true))
	}
	ix, err := discovery.NewIndex(dc)
	if err != nil {
		return nil, nil, fmt.Errorf("toolplane: %w", err)
	}
	s.Agents = make(map[string]map[string]bool, len(b.Agents))
	s.ToolTimeouts = make(map[string]time.Duration, len(b.Agents))
	for name, a := range b.Agents {
		s.ToolTimeouts[name] = a.ToolTimeout
		ids := map[string]bool{}
		for _, e := range ix.GroupTools(agentGroupID(name), false) {
			ids[e.ToolID] = true
		}
		s.Agents[name] = ids
	}
	if s.Skills, err = skills.NewIndex(sk); err != nil {
		return nil, nil, fmt.Errorf("toolplane: %w", err)
	}
	p.parsed = parsed
	return s, ix, nil
}

// agentGroupID is the discovery group of an Agent's tool selection.
func agentGroupID(agent string) string { return "Agent/" + agent }

// parse validates an upload, reusing the last result for the same spec.
func (p *Plane) parse(u domain.TenantResource) parsedUpload {
	k := u.Tenant + "\x00" + u.Kind + "\x00" + u.Name
	if pu, ok := p.parsed[k]; ok && pu.spec == string(u.Spec) {
		return pu
	}
	pu := parsedUpload{spec: string(u.Spec)}
	switch u.Kind {
	case domain.TenantKindSkill:
		pu.skill, pu.err = bundle.ParseTenantSkill(u.Tenant, u.Spec)
	case domain.TenantKindTool:
		pu.tool, pu.err = p.parseTool(u.Spec)
	default:
		pu.err = fmt.Errorf("unknown kind %q", u.Kind)
	}
	return pu
}

// parseTool validates an uploaded tool spec, with the plane's URL rule on
// top of the bundle's: https only, unless private upstreams are allowed.
func (p *Plane) parseTool(spec []byte) (*bundle.Tool, error) {
	t, err := bundle.ParseTenantTool(spec)
	if err != nil {
		return nil, err
	}
	if t.URL != "" && !p.cfg.AllowPrivateUpstreams {
		if u, err := url.Parse(t.URL); err != nil || u.Scheme != "https" {
			return nil, &bundle.ValidationError{Problems: []bundle.Problem{{File: bundle.UploadFile, Field: "url",
				Message: "an uploaded tool's url must be https"}}}
		}
	}
	return t, nil
}

// Upload validates spec as a tenant's Skill or Tool and stores it
// (replacing the tenant's upload of the same name or id), then reloads.
// It returns the stored name (the skill name or tool id). A
// *bundle.ValidationError lists what is wrong, by spec field.
func (p *Plane) Upload(ctx context.Context, tenant, kind string, spec []byte) (string, error) {
	if p.cfg.Tenants == nil {
		return "", ErrUploadsOff
	}
	if !domain.ValidTenantID(tenant) {
		return "", fmt.Errorf("tenant %.80q: want 1-64 of letters, digits, _ . - starting with a letter or digit: %w", tenant, domain.ErrInvalidID)
	}
	if len(spec) > domain.MaxTenantSpecBytes {
		return "", fmt.Errorf("the spec is %d bytes, at most %d", len(spec), domain.MaxTenantSpecBytes)
	}
	if err := p.Reload(ctx); err != nil {
		return "", err
	}
	cur := p.snap.Load()
	name, stored, err := p.checkUpload(cur, tenant, kind, spec)
	if err != nil {
		return "", err
	}
	if err := cur.roomFor(tenant, kind, name); err != nil {
		return "", err
	}
	r := domain.TenantResource{Tenant: tenant, Kind: kind, Name: name, Spec: compact(stored), UpdatedAt: p.cfg.Now().UTC()}
	if err := r.Validate(); err != nil {
		return "", err
	}
	if err := p.cfg.Tenants.PutTenantResource(ctx, r); err != nil {
		return "", fmt.Errorf("storing the upload: %w", err)
	}
	return name, p.Reload(ctx)
}

// checkUpload validates spec as kind against cur and returns the name it
// is stored under and the spec to store.
func (p *Plane) checkUpload(cur *Snapshot, tenant, kind string, spec []byte) (name string, stored []byte, err error) {
	switch kind {
	case domain.TenantKindSkill:
		return p.checkSkillUpload(tenant, spec)
	case domain.TenantKindTool:
		name, err := p.checkToolUpload(cur, tenant, spec)
		return name, spec, err
	}
	return "", nil, fmt.Errorf("kind %q: want %s or %s", kind, domain.TenantKindSkill, domain.TenantKindTool)
}

// checkSkillUpload validates a tenant's skill, which must not be one the
// bundle defines for that tenant, and returns its name and the spec as
// stored (the fields the bundle reads, nothing more).
func (p *Plane) checkSkillUpload(tenant string, spec []byte) (string, []byte, error) {
	x, err := bundle.ParseTenantSkill(tenant, spec)
	if err != nil {
		return "", nil, err
	}
	for _, bs := range p.snap.Load().bundle.Skills {
		if bs.TenantID == tenant && bs.SkillName == x.SkillName {
			return "", nil, conflict("name", "the bundle already defines this tenant's skill %q", x.SkillName)
		}
	}
	return x.SkillName, mustJSON(map[string]any{"name": x.SkillName, "description": x.Description, "content": x.Content}), nil
}

// checkToolUpload validates a tenant's tool and returns its id. Its name
// is what the model sees, so it must differ from every bundle tool's and
// from the tenant's other tools'.
func (p *Plane) checkToolUpload(cur *Snapshot, tenant string, spec []byte) (string, error) {
	t, err := p.parseTool(spec)
	if err != nil {
		return "", err
	}
	for id, e := range cur.Tools {
		if e.Tool.ToolName != t.ToolName {
			continue
		}
		if e.Tenant == "" {
			return "", conflict("name", "%q is the name of a bundle tool (%s): the model could not tell them apart", t.ToolName, id)
		}
		if e.Tenant == tenant && e.Tool.ID != t.ID {
			return "", conflict("name", "%q is already the name of this tenant's tool %s", t.ToolName, e.Tool.ID)
		}
	}
	return t.ID, nil
}

// roomFor reports ErrLimit when tenant has MaxPerTenant uploads of kind
// and name is not one of them (a replacement always fits).
func (s *Snapshot) roomFor(tenant, kind, name string) error {
	n := 0
	for _, u := range s.uploads {
		if u.Tenant != tenant || u.Kind != kind {
			continue
		}
		if u.Name == name {
			return nil
		}
		n++
	}
	if n >= MaxPerTenant {
		return fmt.Errorf("tenant %s already has %d uploaded %ss, the most allowed: %w", tenant, n, kind, ErrLimit)
	}
	return nil
}

// Delete removes a tenant's upload and reloads; domain.ErrNotFound when
// the tenant has none of that name.
func (p *Plane) Delete(ctx context.Context, tenant, kind, name string) error {
	if p.cfg.Tenants == nil {
		return ErrUploadsOff
	}
	if err := (domain.TenantResource{Tenant: tenant, Kind: kind, Name: name, Spec: json.RawMessage("{}")}).Validate(); err != nil {
		return err
	}
	if err := p.cfg.Tenants.DeleteTenantResource(ctx, tenant, kind, name); err != nil {
		return err
	}
	return p.Reload(ctx)
}

// Uploads lists one tenant's uploads of kind from the current snapshot.
func (p *Plane) Uploads(ctx context.Context, tenant, kind string) []domain.TenantResource {
	var out []domain.TenantResource
	for _, u := range p.Snapshot(ctx).uploads {
		if u.Tenant == tenant && u.Kind == kind {
			out = append(out, u)
		}
	}
	return out
}

// ErrLimit: a tenant reached MaxPerTenant.
var ErrLimit = errors.New("upload limit reached")

// ConflictError: the upload collides with the bundle or another upload.
type ConflictError struct{ Field, Message string }

func (e *ConflictError) Error() string { return e.Field + ": " + e.Message }

func conflict(field, format string, args ...any) error {
	return &ConflictError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// compact stores the spec without insignificant whitespace.
func compact(spec []byte) json.RawMessage {
	var v any
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return spec
	}
	b, err := json.Marshal(v)
	if err != nil {
		return spec
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
