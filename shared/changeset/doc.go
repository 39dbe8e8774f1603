// Package changeset changes a bundle the way the tool spec's §12.4 says
// (docs/changesets.md): the bundle is a git repository, an agent opens a
// changeset on the active revision, edits files in it, and commits; the
// commit merges the active head into the changeset (edits to different
// files or hunks merge, overlapping ones are a conflict), checks the
// policy and the bundle loader, and moves the active ref by
// compare-and-swap, so a commit never activates a bundle that would not
// load and never loses a concurrent commit.
//
// The package is pure: the repository (git objects and the active ref) and
// the changeset records are ports (Repo, Records) with a local adapter
// (shared/local/bundlerepo) and an AWS one (S3 objects, DynamoDB items).
// Git objects are go-git's encoding (github.com/go-git/go-git/v5), so the
// history is a real git history on both.
package changeset
