// Package toolcatalog answers "which tools may this caller see" for one
// process: the discovery index of the current bundle revision and tenant
// uploads, with the per-process caches of issue 4 — access resolutions
// (and the caller's merged manifest) keyed by a hash of the verified claims
// (volatile claims left out, 5 min, at most MaxAccessEntries callers) and
// group manifests keyed by group and revision (10 min); expired entries
// are dropped, not only ignored.
//
// A cache never widens access: a new revision or a tenant upload in this
// process replaces the index and drops every entry at once; a change made
// by another process is seen within the TTLs. It must never key an entry by
// anything a caller can choose other than verified claims.
package toolcatalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// Default cache lifetimes (issue 4 item 4).
const (
	AccessTTL = 5 * time.Minute
	GroupTTL  = 10 * time.Minute
)

// DefaultMaxAccessEntries bounds the access cache: one entry per distinct
// set of claims, each holding its caller's merged manifest (a few to a few
// tens of KB), so a burst of distinct callers cannot grow a process
// without limit. Past it, an arbitrary entry makes room: evicting one
// costs its caller one uncached resolution, never access.
const DefaultMaxAccessEntries = 1024

// sweepEvery is how often an insertion also drops every expired entry,
// so an entry nobody asks for again does not outlive its TTL by more
// than this: one pass over the cache per interval, not per call.
const sweepEvery = time.Minute

// volatileClaims change on every token without changing who the caller is.
var volatileClaims = map[string]bool{"exp": true, "iat": true, "nbf": true, "jti": true, "auth_time": true, "nonce": true}

// Options of one query.
type Options struct {
	IncludeDisabled bool // admins only; the caller checks
	SkipCache       bool // admins only; the caller checks
}

// Stats count cache use (for the agent_* metrics).
type Stats struct {
	AccessHits, AccessMisses, GroupHits, GroupMisses int64
}

// Settings of a catalog; the zero value is usable.
type Settings struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// TenantClaim is the claim path of the caller's tenant (default
	// tenant_id): a tenant tool is in a caller's manifest only when this
	// claim equals the tool's tenant.
	TenantClaim string
	// MaxAccessEntries bounds the access cache (DefaultMaxAccessEntries
	// when ≤ 0).
	MaxAccessEntries int
}

// Catalog is safe for concurrent use.
type Catalog struct {
	now         func() time.Time
	tenantClaim string
	maxAccess   int

	mu        sync.Mutex
	index     *discovery.Index
	revision  string
	access    map[string]accessEntry
	groups    map[string]groupEntry
	lastSweep time.Time
	stats     Stats
}

type accessEntry struct {
	groups   []string
	manifest []discovery.ToolManifestEntry // merged; shared, read-only
	expires  time.Time
}

type groupEntry struct {
	tools   []discovery.ToolManifestEntry
	expires time.Time
}

// New returns a catalog over ix for revision (the bundle revision plus
// whatever identifies the tenant uploads).
func New(ix *discovery.Index, revision string, s Settings) *Catalog {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.TenantClaim == "" {
		s.TenantClaim = "tenant_id"
	}
	if s.MaxAccessEntries <= 0 {
		s.MaxAccessEntries = DefaultMaxAccessEntries
	}
	c := &Catalog{now: s.Now, tenantClaim: s.TenantClaim, maxAccess: s.MaxAccessEntries}
	c.Update(ix, revision)
	return c
}

// Update installs a new index (new bundle revision, tenant upload) and drops
// every cached entry, so nothing granted under the old one survives.
func (c *Catalog) Update(ix *discovery.Index, revision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index, c.revision = ix, revision
	c.access = map[string]accessEntry{}
	c.groups = map[string]groupEntry{}
}

// Revision is the revision the catalog answers for.
func (c *Catalog) Revision() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revision
}

// Stats returns the cache counters.
func (c *Catalog) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Manifest returns the tools the caller with these verified claims may see.
// The returned slice may be shared with other callers: read it, never
// modify it.
func (c *Catalog) Manifest(claims map[string]any, opts Options) (discovery.Access, []discovery.ToolManifestEntry) {
	r := c.Resolve(claims, opts)
	return r.Access, r.Manifest
}

// Resolution is a Manifest answer and whether the access cache gave it.
type Resolution struct {
	Access   discovery.Access
	Manifest []discovery.ToolManifestEntry // shared: read only
	Cached   bool
}

// Resolve is Manifest, telling whether the answer came from the cache.
func (c *Catalog) Resolve(claims map[string]any, opts Options) Resolution {
	c.mu.Lock()
	ix, rev := c.index, c.revision
	c.mu.Unlock()
	now := c.now()

	key, cacheable := claimsKey(claims)
	if opts.IncludeDisabled {
		key += "+disabled"
	}
	if !cacheable {
		opts.SkipCache = true
	}
	if !opts.SkipCache {
		c.mu.Lock()
		if e, ok := c.access[key]; ok && c.revision == rev {
			if now.Before(e.expires) {
				c.stats.AccessHits++
				c.mu.Unlock()
				return Resolution{Access: discovery.Access{GroupIDs: e.groups}, Manifest: e.manifest, Cached: true}
			}
			delete(c.access, key)
		}
		c.mu.Unlock()
	}
	access := ix.ResolveAccess(claims)
	groups := access.GroupIDs
	if groups == nil {
		groups = []string{}
	}
	lists := make([][]discovery.ToolManifestEntry, 0, len(groups))
	for _, g := range groups {
		lists = append(lists, c.groupTools(ix, rev, g, opts, now))
	}
	manifest := onlyTenant(discovery.MergeManifests(lists...), callerTenant(claims, c.tenantClaim))
	c.mu.Lock()
	c.stats.AccessMisses++
	if cacheable && c.revision == rev { // never store an answer of a replaced index
		c.sweepLocked(now)
		if _, ok := c.access[key]; !ok {
			c.makeRoomLocked()
		}
		c.access[key] = accessEntry{groups: groups, manifest: manifest, expires: now.Add(AccessTTL)}
	}
	c.mu.Unlock()
	return Resolution{Access: access, Manifest: manifest}
}

func (c *Catalog) groupTools(ix *discovery.Index, rev, group string, opts Options, now time.Time) []discovery.ToolManifestEntry {
	k := rev + "\x00" + group
	if opts.IncludeDisabled {
		k += "\x00disabled"
	}
	if !opts.SkipCache {
		c.mu.Lock()
		e, ok := c.groups[k]
		if ok && now.Before(e.expires) {
			c.stats.GroupHits++
			c.mu.Unlock()
			return e.tools
		}
		c.mu.Unlock()
	}
	tools := ix.GroupTools(group, opts.IncludeDisabled)
	c.mu.Lock()
	c.stats.GroupMisses++
	if c.revision == rev {
		c.groups[k] = groupEntry{tools: tools, expires: now.Add(GroupTTL)}
	}
	c.mu.Unlock()
	return tools
}

// sweepLocked drops every expired entry, at most once per sweepEvery.
func (c *Catalog) sweepLocked(now time.Time) {
	if now.Sub(c.lastSweep) < sweepEvery {
		return
	}
	c.lastSweep = now
	for k, e := range c.access {
		if !now.Before(e.expires) {
			delete(c.access, k)
		}
	}
	for k, e := range c.groups {
		if !now.Before(e.expires) {
			delete(c.groups, k)
		}
	}
}

// makeRoomLocked evicts arbitrary access entries (Go's map order) until
// one more fits: O(1), and fair enough for a cache whose miss costs a
// resolution, never access.
func (c *Catalog) makeRoomLocked() {
	for k := range c.access {
		if len(c.access) < c.maxAccess {
			return
		}
		delete(c.access, k)
	}
}

// callerTenant is the caller's tenant claim in its string form ("" when
// absent, null or not a scalar: such a caller sees no tenant tools), read
// by the one claim-text rule (domain.ClaimText) access policies and the
// principal use.
func callerTenant(claims map[string]any, path string) string {
	s, _ := domain.ClaimText(claims, path)
	return s
}

// visibleTo is the tenant rule: a caller sees the bundle's tools and its
// own tenant's, never another tenant's.
func visibleTo(e discovery.ToolManifestEntry, tenant string) bool {
	return e.Tenant == "" || e.Tenant == tenant
}

// onlyTenant drops the tenant tools of every tenant but tenant. It copies
// only when something is dropped.
func onlyTenant(m []discovery.ToolManifestEntry, tenant string) []discovery.ToolManifestEntry {
	for i, e := range m {
		if !visibleTo(e, tenant) {
			out := slices.Clone(m[:i])
			for _, e := range m[i+1:] {
				if visibleTo(e, tenant) {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return m
}

// claimsKey hashes the claims without the volatile ones. encoding/json
// writes map keys sorted, so equal claims give equal keys. Claims that do
// not marshal are not cacheable.
func claimsKey(claims map[string]any) (string, bool) {
	stable := make(map[string]any, len(claims))
	for k, v := range claims {
		if !volatileClaims[k] {
			stable[k] = v
		}
	}
	b, err := json.Marshal(stable)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}
