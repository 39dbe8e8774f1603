package gitstore

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

func newObjects(t *testing.T, api S3API) *Objects {
	t.Helper()
	o, err := NewObjects(api, "bucket", "bundles/main/")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func blob(data string) *plumbing.MemoryObject {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	o.Write([]byte(data))
	return o
}

// loose is git's loose-object encoding of a header and content.
func loose(t *testing.T, header, content string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	zw.Write([]byte(header + content))
	zw.Close()
	return b.Bytes()
}

// TestObjectLayout: a fresh Objects on the bucket reads the history
// another wrote; every key is <prefix>objects/xx/<38 hex> and its body
// git's loose object of the content named by that hash.
func TestObjectLayout(t *testing.T) {
	r, _, s3api, _ := fakeBackends(t)
	ctx := context.Background()
	head, err := changeset.CommitTree(ctx, r, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cold := newObjects(t, s3api)
	cm, err := object.GetCommit(cold, head)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cm.File("tools/alpha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Contents(); got != changesettest.Tool("alpha") {
		t.Fatalf("alpha read back: %q", got)
	}
	keyRE := regexp.MustCompile(`^bundles/main/objects/([0-9a-f]{2})/([0-9a-f]{38})$`)
	keys := s3api.keys()
	if len(keys) != 7 { // 4 blobs, 2 trees, 1 commit
		t.Fatalf("%d objects: %v", len(keys), keys)
	}
	for _, k := range keys {
		m := keyRE.FindStringSubmatch(k)
		if m == nil {
			t.Fatalf("key %s", k)
		}
		h := plumbing.NewHash(m[1] + m[2])
		zr, err := zlib.NewReader(bytes.NewReader(s3api.body(k)))
		if err != nil {
			t.Fatal(err)
		}
		var raw bytes.Buffer
		raw.ReadFrom(zr)
		hdr, content, ok := bytes.Cut(raw.Bytes(), []byte{0})
		typ, size, _ := strings.Cut(string(hdr), " ")
		ot, _ := plumbing.ParseObjectType(typ)
		if !ok || size != fmt.Sprint(len(content)) || plumbing.ComputeHash(ot, content) != h {
			t.Fatalf("%s: header %q, %d bytes, not the object its key names", k, hdr, len(content))
		}
	}
}

// TestGitReadsTheObjects: the bucket's objects/ folder, copied under a
// .git, is an object directory git itself checks (fsck --strict) and
// reads.
func TestGitReadsTheObjects(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git command on this machine")
	}
	r, _, s3api, _ := fakeBackends(t)
	head, err := changeset.CommitTree(context.Background(), r, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(gitBin, append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	for _, k := range s3api.keys() {
		p := filepath.Join(dir, ".git", filepath.FromSlash(strings.TrimPrefix(k, "bundles/main/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, s3api.body(k), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	run("update-ref", "refs/heads/seed", head.String())
	run("fsck", "--strict", "--no-dangling")
	if got := run("show", "seed:tools/beta.yaml"); got != changesettest.Tool("beta") {
		t.Fatalf("git show: %q", got)
	}
}

// TestMissingAndWrongType: a missing object, or one of another type than
// asked, is plumbing.ErrObjectNotFound itself (go-git compares it).
func TestMissingAndWrongType(t *testing.T) {
	s3api := newFakeS3()
	o := newObjects(t, s3api)
	h, err := o.SetEncodedObject(blob("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h != plumbing.ComputeHash(plumbing.BlobObject, []byte("hello\n")) {
		t.Fatalf("hash %s", h)
	}
	missing := plumbing.ComputeHash(plumbing.BlobObject, []byte("nobody wrote this"))
	for _, o := range []*Objects{o, newObjects(t, s3api)} { // warm and cold
		if _, err := o.EncodedObject(plumbing.BlobObject, missing); err != plumbing.ErrObjectNotFound {
			t.Fatalf("missing: %v", err)
		}
		if err := o.HasEncodedObject(missing); err != plumbing.ErrObjectNotFound {
			t.Fatalf("has missing: %v", err)
		}
		if _, err := o.EncodedObjectSize(missing); err != plumbing.ErrObjectNotFound {
			t.Fatalf("size of missing: %v", err)
		}
		if _, err := object.GetCommit(o, missing); err != plumbing.ErrObjectNotFound {
			t.Fatalf("go-git's GetCommit of a missing object: %v", err)
		}
		if _, err := o.EncodedObject(plumbing.CommitObject, h); err != plumbing.ErrObjectNotFound {
			t.Fatalf("a blob asked as a commit: %v", err)
		}
		for _, typ := range []plumbing.ObjectType{plumbing.BlobObject, plumbing.AnyObject} {
			got, err := o.EncodedObject(typ, h)
			if err != nil || got.Type() != plumbing.BlobObject || got.Size() != 6 || got.Hash() != h {
				t.Fatalf("as %s: %v %v", typ, got, err)
			}
		}
		if err := o.HasEncodedObject(h); err != nil {
			t.Fatal(err)
		}
		if n, err := o.EncodedObjectSize(h); err != nil || n != 6 {
			t.Fatalf("size %d %v", n, err)
		}
	}
	// A missing object is not remembered as missing: once written, it reads.
	other := newObjects(t, s3api)
	if _, err := other.SetEncodedObject(blob("nobody wrote this")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.EncodedObject(plumbing.BlobObject, missing); err != nil {
		t.Fatalf("after another process wrote it: %v", err)
	}
}

// TestReadOnlyObjects: what EncodedObject returns cannot change the
// cached bytes.
func TestReadOnlyObjects(t *testing.T) {
	o := newObjects(t, newFakeS3())
	h, err := o.SetEncodedObject(blob("v1"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Writer(); err == nil {
		t.Fatal("a stored object gave a writer")
	}
	got.SetType(plumbing.TreeObject)
	again, err := o.EncodedObject(plumbing.BlobObject, h)
	if err != nil || again.Type() != plumbing.BlobObject {
		t.Fatalf("the cached object changed: %v %v", again, err)
	}
}

// TestCache: writes and reads of an object the process has seen make no
// call; the cache stays within its bound, and an object too large for it
// is remembered as existing.
func TestCache(t *testing.T) {
	s3api := newFakeS3()
	o := newObjects(t, s3api)
	h, err := o.SetEncodedObject(blob("cached"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.SetEncodedObject(blob("cached")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := o.EncodedObject(plumbing.BlobObject, h); err != nil {
			t.Fatal(err)
		}
	}
	if gets, puts := s3api.calls(); gets != 0 || puts != 1 {
		t.Fatalf("written twice, read thrice: %d GETs, %d PUTs; want 0 and 1", gets, puts)
	}
	cold := newObjects(t, s3api)
	for range 3 {
		if _, err := cold.EncodedObject(plumbing.BlobObject, h); err != nil {
			t.Fatal(err)
		}
	}
	cold.HasEncodedObject(h)
	cold.EncodedObjectSize(h)
	if gets, _ := s3api.calls(); gets != 1 {
		t.Fatalf("a cold process read it with %d GETs, want 1", gets)
	}

	// A small cache: 4 KiB, objects of 1 KiB.
	small := newObjects(t, s3api)
	small.cache = newLRU(4 << 10)
	var hashes []plumbing.Hash
	for i := range 10 {
		h, err := small.SetEncodedObject(blob(fmt.Sprintf("%04d", i) + strings.Repeat("x", 1020)))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	if used, n := small.cache.size(); used > 4<<10 || n != 3 {
		t.Fatalf("cache of 4 KiB holds %d bytes in %d entries", used, n)
	}
	gets, _ := s3api.calls()
	small.EncodedObject(plumbing.BlobObject, hashes[9]) // kept
	small.EncodedObject(plumbing.BlobObject, hashes[0]) // evicted
	if g, _ := s3api.calls(); g != gets+1 {
		t.Fatalf("%d GETs for a kept and an evicted object, want 1", g-gets)
	}
	// Over a quarter of the cache: known to exist, content not kept.
	_, puts := s3api.calls()
	big, err := small.SetEncodedObject(blob(strings.Repeat("y", 2<<10)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.SetEncodedObject(blob(strings.Repeat("y", 2<<10))); err != nil {
		t.Fatal(err)
	}
	if err := small.HasEncodedObject(big); err != nil {
		t.Fatal(err)
	}
	gets, p := s3api.calls()
	if p != puts+1 {
		t.Fatalf("a large object written twice: %d PUTs", p-puts)
	}
	if got, err := small.EncodedObject(plumbing.BlobObject, big); err != nil || got.Size() != 2<<10 {
		t.Fatalf("the large object: %v", err)
	}
	if g, _ := s3api.calls(); g != gets+1 {
		t.Fatal("the large object's content was kept")
	}
}

// TestConditionalPut: every write is conditional on the key being free;
// 412 (taken) is success and leaves the object, 409 (a write in flight)
// is tried again, anything else is an error that holds no content.
func TestConditionalPut(t *testing.T) {
	s3api := newFakeS3()
	first := newObjects(t, s3api)
	h, err := first.SetEncodedObject(blob("same"))
	if err != nil {
		t.Fatal(err)
	}
	stored := s3api.body(first.Key(h))
	second := newObjects(t, s3api)
	if got, err := second.SetEncodedObject(blob("same")); err != nil || got != h {
		t.Fatalf("writing an object another process wrote: %s %v", got, err)
	}
	if !bytes.Equal(s3api.body(first.Key(h)), stored) {
		t.Fatal("the object was overwritten")
	}

	conflicts := 0
	s3api.putErr = func(int, string) error {
		if conflicts < 2 {
			conflicts++
			return apiError("S3", "PutObject", 409, "ConditionalRequestConflict")
		}
		return nil
	}
	_, before := s3api.calls()
	if _, err := newObjects(t, s3api).SetEncodedObject(blob("raced")); err != nil {
		t.Fatalf("after two 409s: %v", err)
	}
	if _, puts := s3api.calls(); puts != before+3 {
		t.Fatalf("%d PUTs, want 3", puts-before)
	}
	s3api.putErr = func(int, string) error { return apiError("S3", "PutObject", 409, "ConditionalRequestConflict") }
	if _, err := newObjects(t, s3api).SetEncodedObject(blob("always raced")); err == nil || !strings.Contains(err.Error(), "ConditionalRequestConflict") {
		t.Fatalf("409 every time: %v", err)
	}

	s3api.putErr = func(int, string) error { return apiError("S3", "PutObject", 500, "InternalError") }
	_, err = newObjects(t, s3api).SetEncodedObject(blob(leak))
	if err == nil {
		t.Fatal("a 500 was success")
	}
	want := "gitstore: put object bundles/main/objects/"
	if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, "api error InternalError (status 500, request id req-1)") || strings.Contains(msg, leak) {
		t.Fatalf("error %q", msg)
	}
}

// TestSetRefuses: objects go-git cannot name by content, and objects whose
// size disagrees with their content, are refused before any call.
func TestSetRefuses(t *testing.T) {
	s3api := newFakeS3()
	o := newObjects(t, s3api)
	delta := &plumbing.MemoryObject{}
	delta.SetType(plumbing.OFSDeltaObject)
	delta.Write([]byte("x"))
	if _, err := o.SetEncodedObject(delta); !errors.Is(err, plumbing.ErrInvalidType) {
		t.Fatalf("a delta: %v", err)
	}
	short := blob("abc")
	short.SetSize(10)
	if _, err := o.SetEncodedObject(short); err == nil {
		t.Fatal("a blob shorter than its size")
	}
	huge := &plumbing.MemoryObject{}
	huge.SetType(plumbing.BlobObject)
	huge.SetSize(MaxObjectBytes + 1)
	if _, err := o.SetEncodedObject(huge); err == nil {
		t.Fatal("a blob over MaxObjectBytes")
	}
	if _, puts := s3api.calls(); puts != 0 {
		t.Fatalf("%d PUTs", puts)
	}
	if _, err := o.IterEncodedObjects(plumbing.AnyObject); err == nil {
		t.Fatal("IterEncodedObjects")
	}
	if err := o.AddAlternate("elsewhere"); err == nil {
		t.Fatal("AddAlternate")
	}
}

// TestCorruptObjects: a body that is not the object its key names is
// domain.ErrCorrupt, and the error says what is wrong without quoting it.
func TestCorruptObjects(t *testing.T) {
	content := leak + "\n"
	h := plumbing.ComputeHash(plumbing.BlobObject, []byte(content))
	cases := map[string][]byte{
		"not zlib":        []byte("blob 19\x00" + content),
		"another content": loose(t, "blob 20\x00", content+"!"),
		"size too small":  loose(t, "blob 5\x00", content),
		"size too large":  loose(t, "blob 40\x00", content),
		"bad type":        loose(t, "delta 19\x00", content),
		"no header":       loose(t, "", strings.Repeat(leak, 3)),
		"size over max":   loose(t, fmt.Sprintf("blob %d\x00", MaxObjectBytes+1), content),
		"leading zero":    loose(t, "blob 019\x00", content),
		"truncated zlib":  loose(t, "blob 19\x00", content)[:20],
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			s3api := newFakeS3()
			o := newObjects(t, s3api)
			s3api.set(o.Key(h), body)
			_, err := o.EncodedObject(plumbing.BlobObject, h)
			if !errors.Is(err, domain.ErrCorrupt) || strings.Contains(err.Error(), leak) || !strings.Contains(err.Error(), o.Key(h)) {
				t.Fatalf("%v", err)
			}
		})
	}
	s3api := newFakeS3()
	o := newObjects(t, s3api)
	s3api.set(o.Key(h), loose(t, "blob 19\x00", content))
	if got, err := o.EncodedObject(plumbing.BlobObject, h); err != nil || got.Size() != 19 {
		t.Fatalf("the sound object: %v", err)
	}
}

// TestCallTimeout: an S3 call that does not answer ends at the deadline.
func TestCallTimeout(t *testing.T) {
	s3api := newFakeS3()
	s3api.getErr = func(ctx context.Context, _ string) error {
		<-ctx.Done()
		return ctx.Err()
	}
	o := newObjects(t, s3api)
	o.timeout = 50 * time.Millisecond
	start := time.Now()
	_, err := o.EncodedObject(plumbing.BlobObject, plumbing.ComputeHash(plumbing.BlobObject, nil))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %s", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %q", err)
	}
}

func TestNewObjects(t *testing.T) {
	s3api := newFakeS3()
	for _, p := range []string{"", "a/", "bundles/main/", "x.y-z_1/2/"} {
		if _, err := NewObjects(s3api, "b", p); err != nil {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
	for _, p := range []string{"a", "/a/", "a//", "../a/", "a/./", "a b/", "a\n/", strings.Repeat("a", 513) + "/"} {
		if _, err := NewObjects(s3api, "b", p); err == nil {
			t.Errorf("prefix %q taken", p)
		}
	}
	if _, err := NewObjects(nil, "b", ""); err == nil {
		t.Error("nil client")
	}
	if _, err := NewObjects(s3api, "", ""); err == nil {
		t.Error("no bucket")
	}
}
