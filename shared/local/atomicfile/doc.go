// Package atomicfile is the one implementation of the crash-safe, race-safe
// small-file writes and advisory locks that the embedded backends (aesseal,
// filestore, filequeue) build on.
//
// A write goes to a temporary file beside its target (named
// .<base>.tmp-<random hex>, created with O_EXCL, fsynced and closed) and is
// then published in one step: renamed over the target (Replace) or linked to
// it, which refuses an existing name (CreateExclusive). Readers see the old
// file or the new one, never a mix and never nothing, and a crash leaves at
// most a stale temporary file, which RemoveStaleTemps clears. LockFile is an
// exclusive advisory lock on a lock file that excludes other processes and
// other LockFile holders in this process alike.
//
// This package must never log, and never put file contents in an error: its
// errors name operations and paths only, because callers store keys and
// sealed secrets with it. It must never replace an existing file from
// CreateExclusive, never follow a symbolic link at the target when it
// publishes, and never leave a temporary file behind when it reports an
// error.
package atomicfile
