package filestore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// openStore is a Store on home.
func openStore(t testing.TB, home string) *Store {
	t.Helper()
	s, err := New(home)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, t.TempDir())
}

// twoStores are two Store values on one fresh home: they behave like two
// processes (separate caches, separate lock file descriptions).
func twoStores(t *testing.T) (a, b *Store) {
	t.Helper()
	home := t.TempDir()
	return openStore(t, home), openStore(t, home)
}

// putSampleGrant stores a new sample grant in s.
func putSampleGrant(t testing.TB, s *Store) domain.Grant {
	t.Helper()
	g, err := s.PutGrant(context.Background(), storetest.SampleGrant(storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// filesUnder lists the files (not directories) below dir.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return files
}

func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) domain.Store { return newStore(t) })
}

// The suite must hold across two instances on one home too.
func TestConformanceTwoInstances(t *testing.T) {
	storetest.RunStorePair(t, func(t *testing.T) (domain.Store, domain.Store) {
		a, b := twoStores(t)
		return a, b
	})
}

func TestLayoutAndModes(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	s := openStore(t, home)
	for _, d := range []string{"oauth", "oauth/grants", "oauth/sessions", "oauth/leases", "oauth/locks", "oauth/reuse"} {
		fi, err := os.Stat(filepath.Join(home, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s mode %o, want 700", d, fi.Mode().Perm())
		}
	}
	g := putSampleGrant(t, s)
	sess := storetest.SampleSession(storetest.NewSessionID())
	sess.ReuseKey = domain.SessionReuseKey(sess.OAuthAppRef, sess.Subject, sess.RequestedScopes, sess.Resume)
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireLease(ctx, "refresh/"+g.ID, "me", time.Minute); err != nil {
		t.Fatal(err)
	}
	check := func(path, kind, id string) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %o, want 600", path, fi.Mode().Perm())
		}
		if kind == "" {
			return
		}
		data, _ := os.ReadFile(path)
		var env struct {
			APIVersion string                     `json:"apiVersion"`
			Kind       string                     `json:"kind"`
			Metadata   map[string]string          `json:"metadata"`
			Spec       map[string]json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatal(err)
		}
		if env.APIVersion != "agents.example.io/v1alpha1" || env.Kind != kind || env.Metadata["name"] != id {
			t.Fatalf("envelope %s %s %v", env.APIVersion, env.Kind, env.Metadata)
		}
		if _, ok := env.Spec["id"]; ok {
			t.Fatal("spec carries an id field")
		}
		if _, ok := env.Spec["provider"]; !ok {
			t.Fatal("spec lacks provider")
		}
	}
	check(filepath.Join(home, "oauth", "grants", g.ID+".enc.json"), "OAuthGrantRecord", g.ID)
	check(filepath.Join(home, "oauth", "sessions", sess.ID+".enc.json"), "AuthSessionRecord", sess.ID)
	leases, _ := os.ReadDir(filepath.Join(home, "oauth", "leases"))
	if len(leases) != 1 {
		t.Fatalf("%d lease files", len(leases))
	}
	check(filepath.Join(home, "oauth", "leases", leases[0].Name()), "", "")
	check(filepath.Join(home, "oauth", "reuse", sess.ReuseKey+".json"), "", "")
	targetDir := filepath.Join(home, "oauth", "pending", domain.ResumeTargetKey(sess.Resume.Target()))
	for _, d := range []string{filepath.Join(home, "oauth", "pending"), targetDir} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, want a directory of mode 700", d, err)
		}
	}
	check(filepath.Join(targetDir, sess.ID), "", "")
	locks, _ := os.ReadDir(filepath.Join(home, "oauth", "locks"))
	for _, l := range locks {
		check(filepath.Join(home, "oauth", "locks", l.Name()), "", "")
	}
	for _, dir := range []string{"grants", "sessions", "leases", "reuse", filepath.Join("pending", filepath.Base(targetDir))} {
		entries, _ := os.ReadDir(filepath.Join(home, "oauth", dir))
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Fatalf("temporary file left behind: %s", e.Name())
			}
		}
	}
}

// A reuse pointer lives as long as the session it names: replaced when
// another session takes the key, removed with its session, and never
// trusted over the session itself.
func TestReusePointerFiles(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	sess := storetest.SampleSession(storetest.NewSessionID())
	sess.EventPending = false
	sess.ReuseKey = domain.SessionReuseKey(sess.OAuthAppRef, sess.Subject, sess.RequestedScopes, sess.Resume)
	pointer := filepath.Join(s.reuseDir, sess.ReuseKey+".json")
	names := func() string {
		t.Helper()
		data, err := os.ReadFile(pointer)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ SessionID string }
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		return p.SessionID
	}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != sess.ID {
		t.Fatalf("pointer names %q, want %s", got, sess.ID)
	}

	// A pointer that does not decode counts as none: the next session
	// with the key replaces it.
	if err := os.WriteFile(pointer, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FindPendingSession(ctx, sess.ReuseKey, sess.CreatedAt); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("FindPendingSession with an unreadable pointer: %v", err)
	}
	next := sess
	next.ID = storetest.NewSessionID()
	if err := s.CreateSession(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != next.ID {
		t.Fatalf("pointer names %q, want %s", got, next.ID)
	}

	// Deleting a session that no longer holds the key leaves the pointer.
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != next.ID {
		t.Fatalf("after deleting the old holder the pointer names %q, want %s", got, next.ID)
	}
	// Deleting the holder removes it.
	if err := s.DeleteSession(ctx, next.ID); err != nil {
		t.Fatal(err)
	}
	if got := names(); got != "" {
		t.Fatalf("after deleting the holder the pointer names %q", got)
	}
}

func TestLeaseFileNameIsAHash(t *testing.T) {
	s := newStore(t)
	if err := s.AcquireLease(context.Background(), "../../../escape", "me", time.Minute); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(s.leasesDir)
	if len(entries) != 1 || strings.Contains(entries[0].Name(), "escape") {
		t.Fatalf("lease files %v", entries)
	}
}

// TestPathTraversalWritesNothing checks that refused ids leave no file
// anywhere under or beside the home.
func TestPathTraversalWritesNothing(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	s := openStore(t, filepath.Join(parent, "home"))
	for _, id := range []string{"../x", "../../x", "grant-../../etc", "grant-../../../x", filepath.Join(parent, "abs"), "grant-0123456789abcdef/../../../x"} {
		g := storetest.SampleGrant(id)
		if _, err := s.PutGrant(ctx, g, 0); !errors.Is(err, domain.ErrInvalidID) {
			t.Fatalf("PutGrant(%q): %v", id, err)
		}
		sess := storetest.SampleSession(id)
		if err := s.CreateSession(ctx, sess); !errors.Is(err, domain.ErrInvalidID) {
			t.Fatalf("CreateSession(%q): %v", id, err)
		}
	}
	if files := filesUnder(t, parent); len(files) != 0 {
		t.Fatalf("files written: %v", files)
	}
}

func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	good, other := putSampleGrant(t, s), putSampleGrant(t, s)
	// Warm the cache so corruption has to be noticed through the stamp.
	if _, err := s.GetGrant(ctx, good.ID); err != nil {
		t.Fatal(err)
	}
	path := s.grantPath(good.ID)
	envelopeFor := func(kind, name string) string {
		return fmt.Sprintf(`{"apiVersion":"agents.example.io/v1alpha1","kind":%q,"metadata":{"name":%q},"spec":{}}`, kind, name)
	}
	cases := map[string]string{
		"truncated":    `{"apiVersion":"agents.example.io/v1alpha1","kind":"OAuthGrantRecord","spec":{"prov`,
		"not json":     "\x00\x01garbage",
		"empty":        "",
		"wrong type":   `{"apiVersion":"agents.example.io/v1alpha1","kind":"OAuthGrantRecord","metadata":{"name":"` + good.ID + `"},"spec":{"version":"xoxb-secret"}}`,
		"wrong kind":   envelopeFor("AuthSessionRecord", good.ID),
		"wrong name":   envelopeFor("OAuthGrantRecord", other.ID),
		"wrong apiver": strings.Replace(envelopeFor("OAuthGrantRecord", good.ID), "v1alpha1", "v9", 1),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			// Make sure the stamp differs even on a coarse clock.
			os.Chtimes(path, time.Now(), time.Now().Add(time.Duration(len(name))*time.Second))
			_, err := s.GetGrant(ctx, good.ID)
			if !errors.Is(err, domain.ErrCorrupt) || !strings.Contains(err.Error(), good.ID) {
				t.Fatalf("want ErrCorrupt naming %s, got %v", good.ID, err)
			}
			if strings.Contains(err.Error(), "xoxb-secret") {
				t.Fatalf("error quotes file content: %v", err)
			}
			grants, errs, err := s.ListGrants(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(grants) != 1 || grants[0].ID != other.ID || len(errs) != 1 || !errors.Is(errs[0], domain.ErrCorrupt) {
				t.Fatalf("ListGrants: %d grants, errors %v", len(grants), errs)
			}
			// Conditional writes refuse too, and nothing touches the file.
			if _, err := s.PutGrant(ctx, storetest.SampleGrant(good.ID), good.Version); !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("PutGrant over a corrupt grant: %v", err)
			}
			sess := storetest.SampleSession(storetest.NewSessionID())
			s.CreateSession(ctx, sess)
			if _, _, err := s.CompleteSession(ctx, sess.ID, time.Now(), storetest.SampleGrant(good.ID)); !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("CompleteSession over a corrupt grant: %v", err)
			}
			if got, _ := s.GetSession(ctx, sess.ID); got.Status != domain.SessionPending {
				t.Fatal("session completed although its grant could not be written")
			}
			if data, _ := os.ReadFile(path); string(data) != content {
				t.Fatal("corrupt file was changed")
			}
		})
	}
}

func TestCorruptSessionListed(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a := storetest.SampleSession(storetest.NewSessionID())
	b := storetest.SampleSession(storetest.NewSessionID())
	s.CreateSession(ctx, a)
	s.CreateSession(ctx, b)
	os.WriteFile(s.sessionPath(a.ID), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(s.sessionsDir, "notes.enc.json"), []byte("{}"), 0o600)
	sessions, errs, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || sessions[0].ID != b.ID || len(errs) != 2 {
		t.Fatalf("%d sessions, errors %v", len(sessions), errs)
	}
	if _, err := s.UpdateSession(ctx, a); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("UpdateSession of a corrupt session: %v", err)
	}
	// An operator can clear it.
	if err := s.DeleteSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCacheSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	a, b := twoStores(t)
	g := storetest.SampleGrant(storetest.NewGrantID())
	v1, err := a.PutGrant(ctx, g, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if got, err := b.GetGrant(ctx, g.ID); err != nil || got.Version != v1.Version+int64(i) {
			t.Fatalf("round %d: b reads version %d (%v), want %d", i, got.Version, err, v1.Version+int64(i))
		}
		// Same size, written immediately after: only inode and mtime differ.
		if _, err := a.PutGrant(ctx, g, v1.Version+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(a.grantPath(g.ID))
	if _, err := b.GetGrant(ctx, g.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after removal: %v", err)
	}
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	g := putSampleGrant(t, s)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			last := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.GetGrant(ctx, g.ID)
				if err != nil {
					t.Error(err)
					return
				}
				if got.Version < last {
					t.Errorf("version went back from %d to %d", last, got.Version)
					return
				}
				last = got.Version
				got.ScopesGranted[0] = "scribble"
			}
		})
	}
	for range 50 {
		cur, err := s.GetGrant(ctx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutGrant(ctx, cur, cur.Version); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestLockHonoursContext(t *testing.T) {
	s := newStore(t)
	l, err := s.lock(context.Background(), "grant-x")
	if err != nil {
		t.Fatal(err)
	}
	defer l.release(false)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.lock(ctx, "grant-x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	// A separate instance waits on the flock rather than the in-process mutex.
	other, _ := New(filepath.Dir(s.root))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := other.lock(ctx2, "grant-x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flock: want deadline exceeded, got %v", err)
	}
}

func TestDeleteRemovesLockFile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	sess := storetest.SampleSession(storetest.NewSessionID())
	s.CreateSession(ctx, sess)
	got, _ := s.GetSession(ctx, sess.ID)
	if _, err := s.UpdateSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireLease(ctx, "k", "o", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, "k", "o"); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	entries, _ := os.ReadDir(s.locksDir)
	if len(entries) != 0 {
		t.Fatalf("lock files left: %v", entries)
	}
}

func TestHasRecords(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if has, err := s.HasRecords(); err != nil || has {
		t.Fatalf("empty store: %v %v", has, err)
	}
	s.AcquireLease(ctx, "k", "o", time.Minute)
	if has, _ := s.HasRecords(); has {
		t.Fatal("a lease is not a record")
	}
	sess := storetest.SampleSession(storetest.NewSessionID())
	s.CreateSession(ctx, sess)
	if has, _ := s.HasRecords(); !has {
		t.Fatal("session not counted")
	}
	os.WriteFile(s.sessionPath(sess.ID), []byte("corrupt"), 0o600)
	if has, _ := s.HasRecords(); !has {
		t.Fatal("an unreadable record is still a record")
	}
}

func mustKeyring(t *testing.T, keys ...byte) *aesseal.Keyring {
	t.Helper()
	raw := make([][]byte, len(keys))
	for i, b := range keys {
		raw[i] = bytes.Repeat([]byte{b}, aesseal.KeySize)
	}
	k, err := aesseal.New(raw[0], raw[1:]...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sealedGrant and sealedSession seal real values with k.
func sealedGrant(t *testing.T, k *aesseal.Keyring, id string) domain.Grant {
	t.Helper()
	ctx := context.Background()
	g := storetest.SampleGrant(id)
	var err error
	g.Token.AccessToken, err = k.Seal(ctx, []byte("access-"+id), domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := k.Seal(ctx, []byte("refresh-"+id), domain.Binding{Record: "grant", RecordID: id, Field: "refreshToken"})
	g.Token.RefreshToken = &r
	return g
}

func sealedSession(t *testing.T, k *aesseal.Keyring, id string) domain.Session {
	t.Helper()
	ctx := context.Background()
	s := storetest.SampleSession(id)
	b := func(f string) domain.Binding { return domain.Binding{Record: "session", RecordID: id, Field: f} }
	s.Flow.PKCE.CodeVerifier, _ = k.Seal(ctx, []byte("verifier-"+id), b("codeVerifier"))
	s.Flow.State, _ = k.Seal(ctx, []byte("state-"+id), b("state"))
	s.Flow.DeviceCode.DeviceCode, _ = k.Seal(ctx, []byte("device-"+id), b("deviceCode"))
	return s
}

func TestResealAndKeyIDs(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	old := mustKeyring(t, 1)
	g1, err := s.PutGrant(ctx, sealedGrant(t, old, storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	g2 := sealedGrant(t, old, storetest.NewGrantID())
	g2.Token.RefreshToken = nil
	if _, err := s.PutGrant(ctx, g2, 0); err != nil {
		t.Fatal(err)
	}
	sess := sealedSession(t, old, storetest.NewSessionID())
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}

	ids, err := s.KeyIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || len(ids[old.CurrentID()]) != 3 {
		t.Fatalf("KeyIDs before: %v", ids)
	}

	// A keyring that lacks the old key fails on the first value and changes nothing.
	stranger := mustKeyring(t, 9)
	n, err := s.Reseal(ctx, stranger)
	if err == nil || n != 0 || !errors.Is(err, aesseal.ErrUnknownKey) || !strings.Contains(err.Error(), "accessToken") {
		t.Fatalf("Reseal with the wrong key: n=%d err=%v", n, err)
	}
	if got, _ := s.GetGrant(ctx, g1.ID); got.Version != g1.Version {
		t.Fatal("failed reseal changed a record")
	}

	rotated := mustKeyring(t, 2, 1)
	n, err = s.Reseal(ctx, rotated)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2+1+3 {
		t.Fatalf("resealed %d values, want 6", n)
	}
	ids, _ = s.KeyIDs(ctx)
	if len(ids) != 1 || len(ids[rotated.CurrentID()]) != 3 {
		t.Fatalf("KeyIDs after: %v", ids)
	}
	got, _ := s.GetGrant(ctx, g1.ID)
	if got.Version != g1.Version+1 {
		t.Fatalf("reseal did not bump the version: %d", got.Version)
	}
	onlyNew := mustKeyring(t, 2)
	pt, err := onlyNew.Open(ctx, got.Token.AccessToken, domain.Binding{Record: "grant", RecordID: g1.ID, Field: "accessToken"})
	if err != nil || string(pt) != "access-"+g1.ID {
		t.Fatalf("resealed value: %v", err)
	}
	gs, _ := s.GetSession(ctx, sess.ID)
	pt, err = onlyNew.Open(ctx, gs.Flow.DeviceCode.DeviceCode, domain.Binding{Record: "session", RecordID: sess.ID, Field: "deviceCode"})
	if err != nil || string(pt) != "device-"+sess.ID {
		t.Fatalf("resealed session value: %v", err)
	}
}

func TestResealStopsAtFirstError(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	k := mustKeyring(t, 1)
	// Grant ids are listed in order: the second grant holds a value moved
	// from the first, which does not open.
	a := sealedGrant(t, k, "grant-0000000000000001")
	b := sealedGrant(t, k, "grant-0000000000000002")
	c := sealedGrant(t, k, "grant-0000000000000003")
	b.Token.RefreshToken = a.Token.RefreshToken
	for _, g := range []domain.Grant{a, b, c} {
		if _, err := s.PutGrant(ctx, g, 0); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Reseal(ctx, mustKeyring(t, 2, 1))
	if err == nil || n != 2 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	for _, want := range []string{b.ID, "refreshToken"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	for id, v := range map[string]int64{a.ID: 2, b.ID: 1, c.ID: 1} {
		if got, _ := s.GetGrant(ctx, id); got.Version != v {
			t.Fatalf("%s version %d, want %d", id, got.Version, v)
		}
	}
}

// Cross-process tests re-run this test binary as children that race on one
// home. Each child blocks on stdin so all start together when the parent
// closes it, then prints one RESULT line.
const childEnv = "FILESTORE_TEST_CHILD"

func TestChildProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("helper for the cross-process tests")
	}
	s, err := New(os.Getenv("FILESTORE_TEST_HOME"))
	if err != nil {
		fmt.Println("RESULT error", err)
		return
	}
	var buf [1]byte
	os.Stdin.Read(buf[:]) // start barrier: returns when the parent closes stdin
	ctx := context.Background()
	owner := os.Getenv("FILESTORE_TEST_OWNER")
	switch mode {
	case "lease":
		err = s.AcquireLease(ctx, "refresh/shared", owner, time.Minute)
	case "putgrant":
		g := storetest.SampleGrant(os.Getenv("FILESTORE_TEST_ID"))
		g.Subject = owner
		_, err = s.PutGrant(ctx, g, 0)
	case "complete":
		g := storetest.SampleGrant(os.Getenv("FILESTORE_TEST_ID"))
		g.Subject = owner
		_, _, err = s.CompleteSession(ctx, os.Getenv("FILESTORE_TEST_SESSION"), time.Now(), g)
	case "tenantput":
		err = s.PutTenantResource(ctx, storetest.SampleTenantResource("acme", domain.TenantKindTool, "racer:"+owner))
	}
	switch {
	case err == nil:
		fmt.Println("RESULT won")
	case errors.Is(err, domain.ErrConflict):
		fmt.Println("RESULT conflict")
	default:
		fmt.Println("RESULT error", err)
	}
}

// raceProcesses runs n children and checks that exactly one won and the
// rest lost with ErrConflict.
func raceProcesses(t *testing.T, n int, mode string, env ...string) (won []int) {
	t.Helper()
	won = runProcesses(t, n, mode, env...)
	if len(won) != 1 {
		t.Fatalf("%s: %d processes won (%v), want exactly 1", mode, len(won), won)
	}
	return won
}

// runProcesses runs n children at once and returns those that won; the
// others lost with ErrConflict.
func runProcesses(t *testing.T, n int, mode string, env ...string) (won []int) {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	type child struct {
		cmd   *exec.Cmd
		stdin interface{ Close() error }
		out   *bytes.Buffer
	}
	children := make([]child, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + mode, fmt.Sprint("FILESTORE_TEST_OWNER=owner-", i)}, env...)...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = child{cmd, stdin, out}
	}
	time.Sleep(200 * time.Millisecond) // let every child reach the barrier
	for _, c := range children {
		c.stdin.Close()
	}
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.out)
		}
		var result string
		sc := bufio.NewScanner(c.out)
		for sc.Scan() {
			if r, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
				result = r
			}
		}
		switch result {
		case "won":
			won = append(won, i)
		case "conflict":
		default:
			t.Fatalf("child %d: %q\n%s", i, result, c.out)
		}
	}
	return won
}

func TestCrossProcessLease(t *testing.T) {
	home := t.TempDir()
	won := raceProcesses(t, 6, "lease", "FILESTORE_TEST_HOME="+home)
	s := openStore(t, home)
	ctx := context.Background()
	if err := s.AcquireLease(ctx, "refresh/shared", fmt.Sprint("owner-", won[0]), time.Minute); err != nil {
		t.Fatalf("winner cannot extend: %v", err)
	}
	if err := s.AcquireLease(ctx, "refresh/shared", "parent", time.Minute); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("parent took a held lease: %v", err)
	}
}

// winnerWrote checks that grant id holds, at version 1, what the one
// winning child wrote.
func winnerWrote(t *testing.T, s *Store, id string, won []int) {
	t.Helper()
	g, err := s.GetGrant(context.Background(), id)
	if err != nil || g.Subject != fmt.Sprint("owner-", won[0]) || g.Version != 1 {
		t.Fatalf("stored grant subject %q version %d (%v), winner %d", g.Subject, g.Version, err, won[0])
	}
}

func TestCrossProcessPutGrant(t *testing.T) {
	home := t.TempDir()
	id := storetest.NewGrantID()
	won := raceProcesses(t, 6, "putgrant", "FILESTORE_TEST_HOME="+home, "FILESTORE_TEST_ID="+id)
	winnerWrote(t, openStore(t, home), id, won)
}

func TestCrossProcessCompleteSession(t *testing.T) {
	home := t.TempDir()
	s := openStore(t, home)
	sess := storetest.SampleSession(storetest.NewSessionID())
	if err := s.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	id := storetest.NewGrantID()
	won := raceProcesses(t, 6, "complete", "FILESTORE_TEST_HOME="+home, "FILESTORE_TEST_ID="+id, "FILESTORE_TEST_SESSION="+sess.ID)
	winnerWrote(t, s, id, won)
}

func BenchmarkGetGrantWarm(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	g := putSampleGrant(b, s)
	if _, err := s.GetGrant(ctx, g.ID); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.GetGrant(ctx, g.ID); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetGrantWarmParallel(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	g := putSampleGrant(b, s)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.GetGrant(ctx, g.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGetGrantCold(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	g := putSampleGrant(b, s)
	b.ReportAllocs()
	for b.Loop() {
		s.grants.drop(g.ID)
		if _, err := s.GetGrant(ctx, g.ID); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPutGrant(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	g := putSampleGrant(b, s)
	var err error
	b.ReportAllocs()
	for b.Loop() {
		if g, err = s.PutGrant(ctx, g, g.Version); err != nil {
			b.Fatal(err)
		}
	}
}
