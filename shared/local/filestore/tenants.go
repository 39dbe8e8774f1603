package filestore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// Tenant uploads (domain.TenantStore) live under <home>/tenants, beside
// the OAuth records rather than among them: they are plain JSON, not
// sealed, and never pass through Reseal. See the package documentation for
// the layout.

var _ domain.TenantStore = (*Store)(nil)

const (
	tenantExt = ".json"
	// tenantRevisionFile holds the uploads revision. It cannot clash with
	// a tenant directory: fileSafe never leaves a '.' in a name.
	tenantRevisionFile = "revision.json"
	// tenantLock is the lock every upload write takes, in locks/: one for
	// all tenants, since every write also moves the one revision.
	tenantLock = "tenants"
	// maxSafeName bounds a file name from fileSafe, leaving room within
	// the usual 255-byte limit for the extension and for the temporary
	// file's ".<name>.tmp-<16 hex>".
	maxSafeName = 200
)

// tenantFile is an upload's file. Spec is the upload's JSON as a string,
// so that a read gives back its bytes exactly (a nested JSON value would
// be re-spaced and re-escaped by the encoder).
type tenantFile struct {
	Tenant    string    `json:"tenant"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	UpdatedAt time.Time `json:"updatedAt"`
	Spec      *string   `json:"spec"`
}

type tenantRevision struct {
	Revision int64 `json:"revision"`
}

// fileSafe maps s to a file name that no other string maps to, even on a
// file system that ignores case (macOS, Windows), and that names nothing
// special anywhere: a-z, 0-9, '_' and '-' stay; an upper-case letter
// becomes '!' and its lower case (as Go's module cache escapes paths);
// every other byte becomes '%' and two lower-case hex digits. So no result
// holds '.', '/', '\' or ':', and none is "." or "..". A result that would
// be a Windows device name (con, nul, com1, …) has its first letter
// escaped too. One longer than maxSafeName is cut, and '~' and a hash of s
// are added to keep it unique (no short result holds '~').
func fileSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte('!')
			b.WriteByte(c - 'A' + 'a')
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	out := b.String()
	if windowsDevice(out) {
		out = fmt.Sprintf("%%%02x", out[0]) + out[1:]
	}
	if len(out) > maxSafeName {
		sum := sha256.Sum256([]byte(s))
		out = out[:maxSafeName-33] + "~" + hex.EncodeToString(sum[:16])
	}
	return out
}

// windowsDevice reports whether name (a fileSafe result, so lower case and
// without '.') is one that Windows opens as a device, with any extension.
func windowsDevice(name string) bool {
	switch name {
	case "con", "prn", "aux", "nul":
		return true
	}
	return len(name) == 4 && (name[:3] == "com" || name[:3] == "lpt") && name[3] >= '0' && name[3] <= '9'
}

// tenantKindDir is the directory of one tenant's uploads of one kind, from
// a validated tenant id and kind (the kinds are fixed, safe names).
func (s *Store) tenantKindDir(tenant, kind string) string {
	return filepath.Join(s.tenantsDir, fileSafe(tenant), kind)
}

func (s *Store) tenantPath(tenant, kind, name string) string {
	return filepath.Join(s.tenantKindDir(tenant, kind), fileSafe(name)+tenantExt)
}

// PutTenantResource writes r's file and then advances the revision, under
// the uploads lock. The upload is in place before the revision moves, so a
// process that sees the new revision and lists finds it. A crash between
// the two leaves the upload stored and the revision where it was: pollers
// see the upload at the next write, or when they start.
func (s *Store) PutTenantResource(ctx context.Context, r domain.TenantResource) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("filestore: put tenant resource: %w", err)
	}
	fail := func(err error) error {
		return fmt.Errorf("filestore: put tenant %s %s %s: %w", r.Tenant, r.Kind, r.Name, err)
	}
	spec := string(r.Spec)
	data, err := json.MarshalIndent(tenantFile{Tenant: r.Tenant, Kind: r.Kind, Name: r.Name, UpdatedAt: r.UpdatedAt, Spec: &spec}, "", "  ")
	if err != nil {
		return fail(err)
	}
	data = append(data, '\n')
	dir := s.tenantKindDir(r.Tenant, r.Kind)
	err = s.changeTenants(ctx, func() error {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		return atomicfile.Replace(s.tenantPath(r.Tenant, r.Kind, r.Name), data, 0o600)
	})
	if err != nil {
		return fail(err)
	}
	return nil
}

// DeleteTenantResource removes the upload's file, and its directories once
// empty, and then advances the revision, under the uploads lock (a crash
// between the two is as for PutTenantResource).
func (s *Store) DeleteTenantResource(ctx context.Context, tenant, kind, name string) error {
	if err := domain.ValidateTenantKey(tenant, kind, name); err != nil {
		return fmt.Errorf("filestore: delete tenant resource: %w", err)
	}
	dir := s.tenantKindDir(tenant, kind)
	err := s.changeTenants(ctx, func() error {
		if err := os.Remove(s.tenantPath(tenant, kind, name)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return domain.ErrNotFound
			}
			return err
		}
		// Best effort, and safe under the lock: every writer that could
		// want the directory takes the lock before MkdirAll.
		if os.Remove(dir) == nil {
			os.Remove(filepath.Dir(dir))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("filestore: delete tenant %s %s %s: %w", tenant, kind, name, err)
	}
	return nil
}

// changeTenants runs change and, when it succeeds, adds one to the
// revision, all under the uploads lock, which excludes other goroutines
// and other processes. A revision file that does not decode stops every
// write (wrapping ErrCorrupt) rather than being overwritten.
func (s *Store) changeTenants(ctx context.Context, change func() error) error {
	l, err := s.lock(ctx, tenantLock)
	if err != nil {
		return err
	}
	defer l.release(false)
	rev, err := s.readTenantRevision()
	if err != nil {
		return err
	}
	if err := change(); err != nil {
		return err
	}
	data, err := json.Marshal(tenantRevision{Revision: rev + 1})
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(filepath.Join(s.tenantsDir, tenantRevisionFile), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("advance revision: %w", err)
	}
	return nil
}

// TenantRevision reads the revision file (0 when there is none). It takes
// no lock: the file is only ever replaced whole.
func (s *Store) TenantRevision(context.Context) (int64, error) {
	rev, err := s.readTenantRevision()
	if err != nil {
		return 0, fmt.Errorf("filestore: tenant revision: %w", err)
	}
	return rev, nil
}

func (s *Store) readTenantRevision() (int64, error) {
	data, err := atomicfile.ReadFile(filepath.Join(s.tenantsDir, tenantRevisionFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var r tenantRevision
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, fmt.Errorf("%s: %w: %s", tenantRevisionFile, domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	if r.Revision < 0 {
		return 0, fmt.Errorf("%s: %w: negative revision", tenantRevisionFile, domain.ErrCorrupt)
	}
	return r.Revision, nil
}

// ListTenantResources reads every upload file, without a lock (each file
// is replaced whole; a write racing the listing may or may not be in it,
// and moves the revision after). Any file under tenants/ that is not an
// upload in its right place, or does not decode, fails the listing with
// an error that names its path (wrapping ErrCorrupt): the port has no way
// to return the rest, and silently dropping one tenant's upload would be
// worse.
func (s *Store) ListTenantResources(ctx context.Context) ([]domain.TenantResource, []error, error) {
	fail := func(err error) ([]domain.TenantResource, []error, error) {
		return nil, nil, fmt.Errorf("filestore: list tenant resources: %w", err)
	}
	var bad []error
	skip := func(err error) { bad = append(bad, fmt.Errorf("filestore: tenant upload skipped: %w", err)) }
	tenants, err := os.ReadDir(s.tenantsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return fail(err)
	}
	var out []domain.TenantResource
	for _, te := range tenants {
		if hidden(te.Name()) || te.Name() == tenantRevisionFile {
			continue
		}
		tenantDir := filepath.Join(s.tenantsDir, te.Name())
		if !te.IsDir() {
			skip(strayFile(tenantDir))
			continue
		}
		kinds, err := os.ReadDir(tenantDir)
		if err != nil {
			return fail(err)
		}
		for _, ke := range kinds {
			if hidden(ke.Name()) {
				continue
			}
			kindDir := filepath.Join(tenantDir, ke.Name())
			if !ke.IsDir() || ke.Name() != domain.TenantKindSkill && ke.Name() != domain.TenantKindTool {
				skip(strayFile(kindDir))
				continue
			}
			files, err := os.ReadDir(kindDir)
			if err != nil {
				return fail(err)
			}
			for _, fe := range files {
				if hidden(fe.Name()) {
					continue
				}
				if err := checkCtx(ctx); err != nil {
					return fail(err)
				}
				r, err := readTenantFile(kindDir, te.Name(), ke.Name(), fe)
				if err != nil {
					if !errors.Is(err, domain.ErrCorrupt) {
						err = fmt.Errorf("%w: %w", domain.ErrCorrupt, err)
					}
					skip(err)
					continue
				}
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b domain.TenantResource) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out, bad, nil
}

// readTenantFile reads one upload file and checks that it is a valid
// upload stored where its tenant, kind and name put it, so a copied or
// hand-made file cannot pass as another tenant's.
func readTenantFile(kindDir, tenantDirName, kind string, fe fs.DirEntry) (domain.TenantResource, error) {
	path := filepath.Join(kindDir, fe.Name())
	if !fe.Type().IsRegular() || !strings.HasSuffix(fe.Name(), tenantExt) {
		return domain.TenantResource{}, strayFile(path)
	}
	data, err := atomicfile.ReadFile(path)
	if err != nil {
		return domain.TenantResource{}, err
	}
	var f tenantFile
	if err := json.Unmarshal(data, &f); err != nil {
		return domain.TenantResource{}, fmt.Errorf("%q: %w: %s", path, domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	if f.Spec == nil {
		return domain.TenantResource{}, fmt.Errorf("%q: %w: no spec", path, domain.ErrCorrupt)
	}
	r := domain.TenantResource{Tenant: f.Tenant, Kind: f.Kind, Name: f.Name, Spec: json.RawMessage(*f.Spec), UpdatedAt: f.UpdatedAt}
	if err := r.Validate(); err != nil {
		return domain.TenantResource{}, fmt.Errorf("%q: %w: %w", path, domain.ErrCorrupt, err)
	}
	if fileSafe(r.Tenant) != tenantDirName || r.Kind != kind || fileSafe(r.Name)+tenantExt != fe.Name() {
		return domain.TenantResource{}, fmt.Errorf("%q: %w: holds tenant %s %s %s, which belongs elsewhere", path, domain.ErrCorrupt, r.Tenant, r.Kind, r.Name)
	}
	return r, nil
}

// hidden: temporary files (atomicfile's ".<name>.tmp-…") and the like,
// never an upload, whose names fileSafe never starts with '.'.
func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func strayFile(path string) error {
	return fmt.Errorf("stray file %q: %w", path, domain.ErrCorrupt)
}
