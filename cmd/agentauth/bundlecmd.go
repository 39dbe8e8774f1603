package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
)

// bundleCommands read and change a bundle that is a git repository: its
// history is the record of every changeset (docs/changesets.md).
func bundleCommands() []command {
	revAbout := "a revision: git:<sha>, a bare sha, active (the revision serve runs) or active~N (N revisions before it)"
	return []command{
		{name: "bundle init", env: true, summary: "make the bundle directory a git repository, its files the first revision",
			about: `Changesets — agents changing their own bundle — need the bundle to be a git repository: its
				branch is the active revision. The first commit holds every file under the directory but
				hidden ones. A directory that already is a repository is refused.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				return func(_ context.Context, std stdio, _ []string) error { return cmdBundleInit(*cfg, std.out) }
			}},
		{name: "bundle import", env: true, required: []string{"from"}, summary: "commit a directory's files into the bundle repository, merged with what agents committed since its last import",
			about: `What make run does before it starts serve: the source directory (examples/bundle) is merged
				into the bundle repository the way a changeset lands — the source's changes since its last
				import and the agents' commits both stay; the same lines changed on both sides are a
				conflict and nothing changes (exit 1). The repository is created when the bundle directory
				does not exist yet. The result must load as a bundle.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				homeFlag(fs, cfg)
				from := fs.String("from", "", "the source `DIR` whose files are imported")
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdBundleImport(ctx, *cfg, *from, std.out)
				}
			}},
		{name: "bundle log", env: true, summary: "list the bundle's revisions, newest first: who changed it (agent, instance, turn, changeset) and why",
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				n := fs.Int("n", 20, "at most `N` revisions")
				asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdBundleLog(ctx, *cfg, *n, *asJSON, std.out)
				}
			}},
		{name: "bundle show", env: true, args: "REV", argsAbout: revAbout, summary: "print one revision: its message, trailers and the files it changed",
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				asJSON := fs.Bool("json", false, "print JSON")
				return func(ctx context.Context, std stdio, args []string) error {
					return cmdBundleShow(ctx, *cfg, args[0], *asJSON, std.out)
				}
			}},
		{name: "bundle diff", env: true, args: "REV", argsAbout: revAbout + "; the diff goes from it to --to", summary: "print the unified diff of the bundle's files between two revisions",
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				to := fs.String("to", "active", "the `REV` the diff goes to")
				return func(ctx context.Context, std stdio, args []string) error {
					return cmdBundleDiff(ctx, *cfg, args[0], *to, std.out)
				}
			}},
		{name: "bundle export", env: true, required: []string{"to"}, summary: "copy the bundle's history into a local git repository (git log, git diff, git blame on it)",
			about: `The source is the AWS deployment's bundle when its variables are set (AGENTAUTH_BUNDLE_REPO,
				AGENTAUTH_TABLE and the others the functions read), else --bundle. The destination is
				created when it does not exist; exporting again into it copies only what is new. Its
				working tree is the active revision.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				to := fs.String("to", "", "the `DIR` of the local repository to export into")
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdBundleExport(ctx, *cfg, *to, std.out)
				}
			}},
		{name: "bundle revert", env: true, args: "REV", argsAbout: revAbout, summary: "undo one revision's changes with a new revision (merged with the later ones, checked to load)",
			about: `The revert is itself a commit on top of the active revision, as a changeset's is: later
				revisions that changed other lines stay; the same lines changed later is a conflict, and
				nothing changes. serve picks it up at each instance's next step.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				bundleFlag(fs, cfg)
				homeFlag(fs, cfg)
				as := fs.String("as", os.Getenv("USER"), "the operator's `NAME`, recorded in the commit")
				return func(ctx context.Context, std stdio, args []string) error {
					return cmdBundleRevert(ctx, *cfg, args[0], *as, std.out)
				}
			}},
	}
}

// openBundleRepo opens the bundle directory's repository, saying what to
// do when it is none.
func openBundleRepo(cfg config.Config) (*bundlerepo.Repo, error) {
	if !bundlerepo.IsRepository(cfg.BundleDir) {
		return nil, fmt.Errorf("bundle %s is not a git repository: run `agentauth bundle init --bundle %s` to make it one", cfg.BundleDir, cfg.BundleDir)
	}
	return bundlerepo.Open(cfg.BundleDir)
}

// bundleManager is a changeset manager on the bundle directory's
// repository that checks results with the bundle loader (secrets from
// the home, as serve reads them). It keeps no changeset records: the
// commands land revisions directly.
func bundleManager(cfg config.Config, repo changeset.Repo) *changeset.Manager {
	opts := bundle.Options{Secrets: bundle.DirSecrets{Dir: cfg.LocalSecrets()}}
	return &changeset.Manager{Repo: repo, Validate: func(files []bundle.File) error { _, err := bundle.Parse(files, opts); return err }}
}

func cmdBundleInit(cfg config.Config, stdout io.Writer) error {
	h, err := bundlerepo.Init(cfg.BundleDir, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bundle %s is a git repository on branch main; its first revision is %s\n", cfg.BundleDir, changeset.Ref(h))
	return nil
}

func cmdBundleImport(ctx context.Context, cfg config.Config, from string, stdout io.Writer) error {
	files, err := changeset.ReadDir(from)
	if err != nil {
		return err
	}
	if !bundlerepo.IsRepository(cfg.BundleDir) {
		if err := bundlerepo.InitEmpty(cfg.BundleDir); err != nil {
			return err
		}
	}
	repo, err := bundlerepo.Open(cfg.BundleDir)
	if err != nil {
		return err
	}
	res, err := bundleManager(cfg, repo).Import(ctx, files, filepath.ToSlash(filepath.Clean(from)))
	var ve *bundle.ValidationError
	if errors.As(err, &ve) {
		return fmt.Errorf("import %s into %s: the result would not load; nothing changed:\n%w", from, cfg.BundleDir, err)
	}
	if err != nil {
		return err
	}
	switch res.Status {
	case changeset.ImportUnchanged:
		fmt.Fprintf(stdout, "bundle %s: %s is unchanged since its last import (active %s)\n", cfg.BundleDir, from, res.NewRef)
	case changeset.ImportConflict:
		return fmt.Errorf("import %s into %s: the bundle's revisions since the last import changed the same lines as %s: %s; nothing changed (agentauth bundle log --bundle %s shows them)",
			from, cfg.BundleDir, from, strings.Join(res.ConflictingFiles, ", "), cfg.BundleDir)
	default:
		fmt.Fprintf(stdout, "bundle %s: imported %s as %s (%s)\n", cfg.BundleDir, from, res.NewRef, summaryLine(res.Summary))
	}
	return nil
}

func summaryLine(s *changeset.Summary) string {
	if s == nil {
		return "no file changed"
	}
	return fmt.Sprintf("%d added, %d changed, %d deleted", len(s.FilesAdded), len(s.FilesChanged), len(s.FilesDeleted))
}

func cmdBundleLog(ctx context.Context, cfg config.Config, n int, asJSON bool, stdout io.Writer) error {
	if n < 1 {
		return usageError{msg: fmt.Sprintf("bundle log: -n %d: want at least 1", n)}
	}
	repo, err := openBundleRepo(cfg)
	if err != nil {
		return err
	}
	log, err := changeset.Log(ctx, repo, n)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, e := range log {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tWHEN (UTC)\tBY\tCHANGESET\tSUBJECT")
	for _, e := range log {
		by := e.Author
		if e.Trailers.Agent != "" {
			by = e.Trailers.Agent + " @ " + e.Trailers.Swarm + "/" + e.Trailers.Instance
		}
		rev := e.Ref[:len(changeset.RefPrefix)+12]
		if e.Active {
			rev += " (active)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rev, e.When.Format("2006-01-02 15:04:05"), by, orDash(e.Trailers.ChangesetID), e.Subject)
	}
	return tw.Flush()
}

func cmdBundleShow(ctx context.Context, cfg config.Config, rev string, asJSON bool, stdout io.Writer) error {
	repo, err := openBundleRepo(cfg)
	if err != nil {
		return err
	}
	ref, err := changeset.ResolveRef(ctx, repo, rev)
	if err != nil {
		return usageError{msg: "bundle show: " + err.Error()}
	}
	e, err := changeset.Show(ctx, repo, ref)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(e)
	}
	active := ""
	if e.Active {
		active = " (active)"
	}
	fmt.Fprintf(stdout, "revision %s%s\nparent   %s\nauthor   %s\ndate     %s\n\n%s\n", e.Ref, active, orDash(e.Parent), e.Author, e.When.Format(time.RFC3339), strings.TrimRight(e.Message, "\n"))
	for _, f := range e.Summary.FilesAdded {
		fmt.Fprintf(stdout, "\nadded    %s", f)
	}
	for _, f := range e.Summary.FilesChanged {
		fmt.Fprintf(stdout, "\nchanged  %s", f)
	}
	for _, f := range e.Summary.FilesDeleted {
		fmt.Fprintf(stdout, "\ndeleted  %s", f)
	}
	fmt.Fprintln(stdout)
	return nil
}

func cmdBundleDiff(ctx context.Context, cfg config.Config, from, to string, stdout io.Writer) error {
	repo, err := openBundleRepo(cfg)
	if err != nil {
		return err
	}
	var refs [2]string
	for i, r := range []string{from, to} {
		if refs[i], err = changeset.ResolveRef(ctx, repo, r); err != nil {
			return usageError{msg: "bundle diff: " + err.Error()}
		}
	}
	d, err := changeset.Diff(ctx, repo, refs[0], refs[1])
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, d)
	return err
}

func cmdBundleRevert(ctx context.Context, cfg config.Config, rev, as string, stdout io.Writer) error {
	if strings.TrimSpace(as) == "" {
		return usageError{msg: "bundle revert: --as: name the operator (it is recorded in the commit)"}
	}
	repo, err := openBundleRepo(cfg)
	if err != nil {
		return err
	}
	ref, err := changeset.ResolveRef(ctx, repo, rev)
	if err != nil {
		return usageError{msg: "bundle revert: " + err.Error()}
	}
	res, err := bundleManager(cfg, repo).Revert(ctx, ref, as)
	if err != nil {
		return err
	}
	if res.Status != changeset.StatusOK {
		return fmt.Errorf("bundle revert %s: %s: %s (%s)", ref, res.Status, res.Error.Message, res.Error.Hint)
	}
	fmt.Fprintf(stdout, "reverted %s as %s (%s); serve runs it from each instance's next step\n", ref, res.NewRef, summaryLine(res.Summary))
	return nil
}

func cmdBundleExport(ctx context.Context, cfg config.Config, to string, stdout io.Writer) error {
	var from changeset.Repo
	where := cfg.BundleDir
	if cfg.AWS != nil && cfg.AWS.BundleRepo != nil {
		be, err := app.OpenAWS(ctx, *cfg.AWS, nil)
		if err != nil {
			return err
		}
		from, where = be.BundleRepo, be.BundleWhere
	} else {
		if filepath.Clean(to) == filepath.Clean(cfg.BundleDir) {
			return usageError{msg: "bundle export: --to names the bundle itself"}
		}
		repo, err := openBundleRepo(cfg)
		if err != nil {
			return err
		}
		from = repo
	}
	if !bundlerepo.IsRepository(to) {
		if err := bundlerepo.InitEmpty(to); err != nil {
			return err
		}
	}
	dst, err := bundlerepo.Open(to)
	if err != nil {
		return err
	}
	head, n, err := changeset.Export(ctx, from, dst)
	if err != nil {
		return fmt.Errorf("export %s to %s: %w", where, to, err)
	}
	fmt.Fprintf(stdout, "exported %s's history to %s: active %s, %d object(s) copied (git -C %s log)\n", where, to, changeset.Ref(head), n, to)
	return nil
}
