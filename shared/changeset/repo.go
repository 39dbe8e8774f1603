package changeset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/bundle"
)

// Repo is where a bundle's history lives: git objects, content-addressed,
// and the active ref, the commit every process loads.
type Repo interface {
	// Objects is the git object database. Objects are immutable and named
	// by their hash, so writing one twice, or one nobody references (a
	// commit whose ref move lost), does no harm.
	Objects() storer.EncodedObjectStorer
	// Head is the active commit; ErrNoRevision when the repository has
	// none yet.
	Head(ctx context.Context) (plumbing.Hash, error)
	// SwapHead moves the active ref from old to new in one step, or
	// answers ErrHeadMoved when it is no longer at old (ZeroHash: when
	// there is none yet).
	SwapHead(ctx context.Context, old, new plumbing.Hash) error
}

var (
	// ErrNoRevision: the repository has no commit yet.
	ErrNoRevision = errors.New("changeset: the bundle repository has no commit")
	// ErrHeadMoved: a compare-and-swap of the active ref lost to another
	// writer.
	ErrHeadMoved = errors.New("changeset: the active ref moved")
)

// RefPrefix marks a revision that is a git commit: "git:<sha>".
const RefPrefix = "git:"

// Ref is the revision name of commit h.
func Ref(h plumbing.Hash) string { return RefPrefix + h.String() }

// ParseRef reads a "git:<sha>" revision.
func ParseRef(ref string) (plumbing.Hash, error) {
	sha, ok := strings.CutPrefix(ref, RefPrefix)
	if !ok || len(sha) != 40 || !plumbing.IsHash(sha) {
		return plumbing.ZeroHash, fmt.Errorf("revision %q: want git:<40 hex digits>", ref)
	}
	return plumbing.NewHash(sha), nil
}

// tree is a commit's files, flat: slash-separated path → blob.
type tree map[string]plumbing.Hash

// readTree lists the files of commit c.
func readTree(objs storer.EncodedObjectStorer, c plumbing.Hash) (tree, error) {
	cm, err := object.GetCommit(objs, c)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", c, err)
	}
	t, err := cm.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s's tree: %w", c, err)
	}
	out, err := treeFiles(t)
	if err != nil {
		return nil, fmt.Errorf("commit %s's files: %w", c, err)
	}
	return out, nil
}

// CommitFiles lists the files of commit c, path → blob, without reading a
// blob (the local backend's working-tree sync compares them with the
// files on disk).
func CommitFiles(objs storer.EncodedObjectStorer, c plumbing.Hash) (map[string]plumbing.Hash, error) {
	return readTree(objs, c)
}

// treeFiles lists t's files by walking its trees only: no blob is read
// (on S3 each would be a GET).
func treeFiles(t *object.Tree) (tree, error) {
	out := tree{}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Mode.IsFile() {
			out[name] = e.Hash
		}
	}
}

// ReadBlob returns blob h's content, at most limit bytes (an error
// beyond): the local working-tree sync reads blobs with it too.
func ReadBlob(objs storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	return readBlob(objs, h, limit)
}

func readBlob(objs storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	o, err := objs.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	if o.Size() > limit {
		return nil, fmt.Errorf("blob %s is %d bytes: %w", h, o.Size(), errTooLarge)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

var errTooLarge = errors.New("too large")

// writeBlob stores data as a blob and returns its hash.
func writeBlob(objs storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	o := objs.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
	o.SetSize(int64(len(data)))
	w, err := o.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return objs.SetEncodedObject(o)
}

// blobHash is the hash data has as a blob, without storing it.
func blobHash(data []byte) plumbing.Hash {
	return plumbing.ComputeHash(plumbing.BlobObject, data)
}

// writeTree stores the directory trees of t and returns the root's hash.
// Files are regular (0644): a bundle has no executables or links.
func writeTree(objs storer.EncodedObjectStorer, t tree) (plumbing.Hash, error) {
	type dir struct {
		files map[string]plumbing.Hash
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]plumbing.Hash{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, h := range t {
		d := root
		parts := strings.Split(p, "/")
		for _, name := range parts[:len(parts)-1] {
			sub, ok := d.dirs[name]
			if !ok {
				sub = newDir()
				d.dirs[name] = sub
			}
			d = sub
		}
		d.files[parts[len(parts)-1]] = h
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		var entries []object.TreeEntry
		for name, h := range d.files {
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
		}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(sortName(a), sortName(b)) })
		o := objs.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
			return plumbing.ZeroHash, err
		}
		return objs.SetEncodedObject(o)
	}
	return write(root)
}

// sortName is the name git sorts a tree entry by: a directory's with a
// trailing slash.
func sortName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// writeCommit stores a commit of root with parent (none when zero).
func writeCommit(objs storer.EncodedObjectStorer, root, parent plumbing.Hash, author, committer object.Signature, msg string) (plumbing.Hash, error) {
	c := &object.Commit{Author: author, Committer: committer, Message: msg, TreeHash: root}
	if !parent.IsZero() {
		c.ParentHashes = []plumbing.Hash{parent}
	}
	o := objs.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return objs.SetEncodedObject(o)
}

// BundleFiles reads the bundle files of commit c — the YAML files the
// loader reads (bundle.IsBundleFile) — for bundle.Parse.
func BundleFiles(repo Repo, c plumbing.Hash) ([]bundle.File, error) {
	t, err := readTree(repo.Objects(), c)
	if err != nil {
		return nil, err
	}
	return t.bundleFiles(repo.Objects())
}

func (t tree) bundleFiles(objs storer.EncodedObjectStorer) ([]bundle.File, error) {
	var out []bundle.File
	for _, p := range t.paths() {
		if !bundle.IsBundleFile(p) {
			continue
		}
		data, err := readBlob(objs, t[p], MaxReadBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, bundle.File{Name: p, Data: data})
	}
	return out, nil
}

// paths lists t's paths in order.
func (t tree) paths() []string {
	out := make([]string, 0, len(t))
	for p := range t {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ImportFile is one file of an imported tree.
type ImportFile struct {
	Path string
	Data []byte
}

// CommitTree commits files as the whole tree of a new revision on top of the
// active one (the first revision when there is none) and moves the active
// ref to it; message says where the files came from. It answers the
// active commit unchanged when files are exactly its tree. A lost swap is
// ErrHeadMoved: the caller reads the head again and decides.
func CommitTree(ctx context.Context, repo Repo, files []ImportFile, message string, at time.Time) (plumbing.Hash, error) {
	objs := repo.Objects()
	head, err := repo.Head(ctx)
	if errors.Is(err, ErrNoRevision) {
		head = plumbing.ZeroHash
	} else if err != nil {
		return plumbing.ZeroHash, err
	}
	t := tree{}
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := writeBlob(objs, f.Data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t[f.Path] = h
	}
	root, err := writeTree(objs, t)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !head.IsZero() {
		cm, err := object.GetCommit(objs, head)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if cm.TreeHash == root {
			return head, nil
		}
	}
	sig := signature("agentauth", "agentauth@agentauth.invalid", at)
	c, err := writeCommit(objs, root, head, sig, sig, message)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := repo.SwapHead(ctx, head, c); err != nil {
		return plumbing.ZeroHash, err
	}
	return c, nil
}

// ReadDir reads every regular file under dir but hidden ones (.git, dot
// files), as files to import: `agentauth bundle import` and a Lambda
// function's packaged bundle read a source the same way.
func ReadDir(dir string) ([]ImportFile, error) {
	var out []ImportFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, ImportFile{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return out, nil
}
