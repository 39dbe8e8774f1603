package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/listtree"
)

// The operator lists (domain.OperatorQueries): an index on disk, one tree
// of empty files per kind, scope and (grants) state, under <home>/oauth/list:
//
//	list/grants/<scope>/<state>/<b1>/<b2>/<listKey>
//	list/sessions/<scope>/<b1>/<b2>/<listKey>
//
// scope is "all" (every tenant) or "t-" and the tenant (fileSafe: "t-" for
// records of no tenant), so each record has two entries; state is active
// or revoked. listKey is domain.ListKey of the record's creation time and
// id: its inverted creation time first, so name order is newest first. b1
// and b2 are its first 6 and next 4 digits: a directory per 10^13 ns
// (about 2.8 hours) of creation time, one per second in it. A page reads
// the bucket names it passes and the leaves that hold its entries, then
// the records they name (a stat each when cached), so what it costs
// follows the page, not the store — unless a second's bucket holds a
// great many records (a burst of creations in one second).
//
// The entries of a record follow from its tenant, creation time, id and
// (grants) revoked flag. Every write that creates a record or changes
// those writes the new entries first (under the record's lock, or, for a
// new session, before the exclusive create), then the record, then removes
// the old entries; a deletion removes the record, then its entries. A
// write also adds any entry of its record that is missing. So a crash
// leaves an entry too many, never one too few: a list skips an entry
// whose record is gone or says otherwise (the record decides) and removes
// it once it is older than staleMarkerAge (the gap between an entry and
// its record's write lasts milliseconds). Entries are not synced on their
// own: the record's write, synced right after, commits them with it on a
// journaling file system; where a crash does lose one, the record is
// missing from the lists until its next write adds the entry again, or
// until the index is built again (remove list/: New builds it from the
// records, as it does for a home written before the index). A directory
// goes with its last entry; a writer that finds its bucket gone makes it
// again, so two processes on one home keep the index right.

const (
	listDirName = "list"
	scopeAll    = "all"
	// listExamineBound bounds the entries a page examines when it filters
	// on what the index does not key: such a page ends early with a Next.
	listExamineBound = 500
	stateActive      = "active"
	stateRevoked     = "revoked"
	// stateFailing holds the grants not revoked whose last refreshes
	// failed (they move back to stateActive when one succeeds).
	stateFailing    = "failing"
	listBuildPrefix = ".list-build-"
)

// listEntry is one index entry: its tree and its name.
type listEntry struct{ root, key string }

func (e listEntry) dir() string  { return filepath.Join(e.root, e.key[:6], e.key[6:10]) }
func (e listEntry) path() string { return filepath.Join(e.dir(), e.key) }

func tenantScope(tenant string) string { return "t-" + fileSafe(tenant) }

func (s *Store) grantRoot(scope, state string) string {
	return filepath.Join(s.listDir, "grants", scope, state)
}

func (s *Store) sessionRoot(scope string) string {
	return filepath.Join(s.listDir, "sessions", scope)
}

func grantState(g domain.Grant) string {
	switch {
	case g.Revoked:
		return stateRevoked
	case g.RefreshFailures > 0:
		return stateFailing
	}
	return stateActive
}

// grantEntries are the entries g must have (none for the zero grant).
func (s *Store) grantEntries(g domain.Grant) []listEntry {
	if g.ID == "" {
		return nil
	}
	k, st := domain.ListKey(g.CreatedAt, g.ID), grantState(g)
	return []listEntry{{s.grantRoot(scopeAll, st), k}, {s.grantRoot(tenantScope(g.Tenant), st), k}}
}

func (s *Store) sessionEntries(sess domain.Session) []listEntry {
	if sess.ID == "" {
		return nil
	}
	k := domain.ListKey(sess.CreatedAt, sess.ID)
	return []listEntry{{s.sessionRoot(scopeAll), k}, {s.sessionRoot(tenantScope(sess.Tenant)), k}}
}

// addEntries writes the entries that are not there yet.
func addEntries(es []listEntry) error {
	for _, e := range es {
		if err := addEntry(e); err != nil {
			return fmt.Errorf("list index: %w", err)
		}
	}
	return nil
}

func addEntry(e listEntry) error {
	path := e.path()
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	for attempt := 1; ; attempt++ {
		err := os.MkdirAll(e.dir(), 0o700)
		if err == nil {
			var f *os.File
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err == nil {
				return f.Close()
			}
			if errors.Is(err, fs.ErrExist) {
				return nil
			}
		}
		// ErrNotExist: a bucket went with another record's last entry
		// after MkdirAll made it; make it again.
		if !errors.Is(err, fs.ErrNotExist) || attempt == mkdirRetries {
			return err
		}
	}
}

// dropEntries removes the entries of old that are not in keep, and their
// buckets when they are left empty. It is best effort: an entry left
// behind is one lists skip and remove.
func dropEntries(old, keep []listEntry) {
	for _, e := range old {
		if !slices.Contains(keep, e) {
			dropEntry(e)
		}
	}
}

func dropEntry(e listEntry) {
	if err := os.Remove(e.path()); err != nil {
		return
	}
	// Each fails while its directory holds anything.
	if os.Remove(e.dir()) == nil {
		_ = os.Remove(filepath.Dir(e.dir()))
	}
}

// pruneEntry removes an entry a list found stale (no record, or a record
// that says otherwise) once it is older than staleMarkerAge: a younger
// one may be a write in progress.
func pruneEntry(e listEntry) {
	fi, err := os.Lstat(e.path())
	if err != nil || time.Since(fi.ModTime()) <= staleMarkerAge {
		return
	}
	dropEntry(e)
}

// merged yields the keys of several trees in order, with the index of
// the tree each comes from.
func merged(roots []string, after, end string) iter.Seq2[listEntry, error] {
	return func(yield func(listEntry, error) bool) {
		type head struct {
			next func() (string, error, bool)
			stop func()
			key  string
			ok   bool
		}
		heads := make([]*head, len(roots))
		for i, r := range roots {
			next, stop := iter.Pull2(listtree.Walk(r, after, end, nil))
			defer stop()
			h := &head{next: next, stop: stop}
			heads[i] = h
		}
		advance := func(h *head) error {
			k, err, ok := h.next()
			h.key, h.ok = k, ok && err == nil
			return err
		}
		for _, h := range heads {
			if err := advance(h); err != nil {
				yield(listEntry{}, err)
				return
			}
		}
		for {
			best := -1
			for i, h := range heads {
				if h.ok && (best < 0 || h.key < heads[best].key) {
					best = i
				}
			}
			if best < 0 {
				return
			}
			if !yield(listEntry{roots[best], heads[best].key}, nil) {
				return
			}
			if err := advance(heads[best]); err != nil {
				yield(listEntry{}, err)
				return
			}
		}
	}
}

// fillPage passes the entries of roots after after (and before end) to
// take, in order, until take has kept limit or, with filtered, the page
// has examined listExamineBound entries; it returns the page's Next ("":
// no entry is left).
func fillPage(ctx context.Context, roots []string, after, end string, limit int, filtered bool, take func(e listEntry) bool) (string, error) {
	got, examined, cursor := 0, 0, ""
	for e, err := range merged(roots, after, end) {
		if err != nil {
			return "", err
		}
		if got == limit || filtered && examined >= listExamineBound {
			return cursor, nil // e is one more
		}
		if err := checkCtx(ctx); err != nil {
			return "", err
		}
		examined++
		cursor = e.key
		if take(e) {
			got++
		}
	}
	return "", nil
}

func checkAfter(after string) error {
	if after == "" {
		return nil
	}
	_, _, err := domain.ParseListKey(after)
	return err
}

func scopeOf(tenant string, anyTenant bool) string {
	if anyTenant {
		return scopeAll
	}
	return tenantScope(tenant)
}

// QueryGrants reads one page of grants from the index: the scope's active
// or revoked tree, or both merged, newest first, and the grants the
// entries name. App and Subject are checked on the grants read.
func (s *Store) QueryGrants(ctx context.Context, q domain.GrantQuery) (domain.GrantPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err == nil {
		err = checkAfter(q.After)
	}
	if err != nil {
		return domain.GrantPage{}, fmt.Errorf("filestore: query grants: %w", err)
	}
	scope := scopeOf(q.Tenant, q.AnyTenant)
	var roots []string
	if q.Revoked == nil || !*q.Revoked {
		roots = append(roots, s.grantRoot(scope, stateActive), s.grantRoot(scope, stateFailing))
	}
	if q.Revoked == nil || *q.Revoked {
		roots = append(roots, s.grantRoot(scope, stateRevoked))
	}
	var page domain.GrantPage
	page.Next, err = fillPage(ctx, roots, q.After, "", limit, q.App != "" || q.Subject != "", func(e listEntry) bool {
		_, id, _ := domain.ParseListKey(e.key)
		if domain.ValidateGrantID(id) != nil {
			return false
		}
		g, err := s.grants.get(id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			pruneEntry(e)
			return false
		case err != nil:
			page.Unreadable = append(page.Unreadable, err)
			return false
		}
		if !slices.Contains(s.grantEntries(g), e) {
			pruneEntry(e) // left by a write that moved the grant
			return false
		}
		ok := (q.AnyTenant || g.Tenant == q.Tenant) && (q.Revoked == nil || g.Revoked == *q.Revoked) &&
			(q.App == "" || g.OAuthAppRef.Name == q.App) && (q.Subject == "" || g.Subject == q.Subject)
		if ok {
			page.Grants = append(page.Grants, g)
		}
		return ok
	})
	if err != nil {
		return domain.GrantPage{}, fmt.Errorf("filestore: query grants: %w", err)
	}
	return page, nil
}

// QuerySessions reads one page of sessions from the scope's tree, newest
// first, down to Since. App, Status and Reason are checked on the
// sessions read.
func (s *Store) QuerySessions(ctx context.Context, q domain.SessionQuery) (domain.SessionPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err == nil {
		err = checkAfter(q.After)
	}
	if err != nil {
		return domain.SessionPage{}, fmt.Errorf("filestore: query sessions: %w", err)
	}
	end := ""
	if !q.Since.IsZero() {
		end = domain.ListKeySince(q.Since)
	}
	roots := []string{s.sessionRoot(scopeOf(q.Tenant, q.AnyTenant))}
	var page domain.SessionPage
	filtered := q.App != "" || q.Status != "" || q.Reason != ""
	page.Next, err = fillPage(ctx, roots, q.After, end, limit, filtered, func(e listEntry) bool {
		_, id, _ := domain.ParseListKey(e.key)
		if domain.ValidateSessionID(id) != nil {
			return false
		}
		sess, err := s.sessions.get(id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			pruneEntry(e)
			return false
		case err != nil:
			page.Unreadable = append(page.Unreadable, err)
			return false
		}
		if !slices.Contains(s.sessionEntries(sess), e) {
			pruneEntry(e)
			return false
		}
		ok := (q.AnyTenant || sess.Tenant == q.Tenant) && (q.App == "" || sess.OAuthAppRef.Name == q.App) &&
			(q.Status == "" || sess.Status == q.Status) && (q.Reason == "" || sess.StatusReason == q.Reason) &&
			!sess.CreatedAt.Before(q.Since)
		if ok {
			page.Sessions = append(page.Sessions, sess)
		}
		return ok
	})
	if err != nil {
		return domain.SessionPage{}, fmt.Errorf("filestore: query sessions: %w", err)
	}
	return page, nil
}

// CountGrants counts the entries of the scope's active and revoked trees,
// up to limit+1 each: what it costs follows limit. It counts entries, not
// grants read: one a crash left (see above) counts until a list removes
// it.
func (s *Store) CountGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (active, revoked int, capped bool, err error) {
	if limit < 1 {
		return 0, 0, false, fmt.Errorf("filestore: count grants: %w: limit %d", domain.ErrInvalidID, limit)
	}
	// Failing grants are active ones: their range is counted only up to
	// what the active range leaves of limit+1.
	var n [3]int
	for i, st := range [...]string{stateActive, stateFailing, stateRevoked} {
		lim := limit
		if i == 1 {
			if n[0] > limit {
				continue // capped already
			}
			lim = limit - n[0]
		}
		if n[i], err = s.countState(ctx, tenant, anyTenant, st, lim); err != nil {
			return 0, 0, false, fmt.Errorf("filestore: count grants: %w", err)
		}
	}
	active, revoked = n[0]+n[1], n[2]
	if active > limit {
		active, capped = limit, true
	}
	if revoked > limit {
		revoked, capped = limit, true
	}
	return active, revoked, capped, nil
}

// CountFailingGrants counts the scope's failing entries, up to limit.
func (s *Store) CountFailingGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (int, bool, error) {
	if limit < 1 {
		return 0, false, fmt.Errorf("filestore: count failing grants: %w: limit %d", domain.ErrInvalidID, limit)
	}
	n, err := s.countState(ctx, tenant, anyTenant, stateFailing, limit)
	if err != nil {
		return 0, false, fmt.Errorf("filestore: count failing grants: %w", err)
	}
	if n > limit {
		return limit, true, nil
	}
	return n, false, nil
}

// countState counts one state's entries in the scope, up to limit+1.
func (s *Store) countState(ctx context.Context, tenant string, anyTenant bool, state string, limit int) (int, error) {
	n := 0
	for _, err := range listtree.Walk(s.grantRoot(scopeOf(tenant, anyTenant), state), "", "", nil) {
		if err != nil {
			return 0, err
		}
		if n++; n > limit {
			break
		}
	}
	return n, checkCtx(ctx)
}

// buildListIndex gives a home without the list index (one written before
// it, or a new one) its list/ directory, from the records, built aside
// and renamed into place as buildPendingIndex does. Unreadable records
// are left out: lists could not show them either.
func (s *Store) buildListIndex() error {
	if _, err := os.Stat(s.listDir); err == nil {
		return nil
	}
	removeStaleBuilds(s.root, listBuildPrefix)
	build, err := os.MkdirTemp(s.root, listBuildPrefix)
	if err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	defer os.RemoveAll(build)
	aside := &Store{listDir: build}
	grants, _, err := s.grants.list(context.Background())
	if err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	for _, g := range grants {
		if err := addEntries(aside.grantEntries(g)); err != nil {
			return fmt.Errorf("build the list index: grant %s: %w", g.ID, err)
		}
	}
	sessions, _, err := s.sessions.list(context.Background())
	if err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	for _, sess := range sessions {
		if err := addEntries(aside.sessionEntries(sess)); err != nil {
			return fmt.Errorf("build the list index: session %s: %w", sess.ID, err)
		}
	}
	if err := os.Rename(build, s.listDir); err != nil {
		if _, serr := os.Stat(s.listDir); serr == nil {
			return nil // another process's build won
		}
		return fmt.Errorf("build the list index: %w", err)
	}
	if err := atomicfile.SyncDir(s.root); err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	return nil
}

var _ domain.OperatorQueries = (*Store)(nil)
