package changeset

import (
	"context"
	"errors"
	"time"
)

// Owner is the agent instance a changeset belongs to: the whole scope
// (swarm, instance key, agent). Only its owner reads, edits or commits a
// changeset; anyone else is told it does not exist.
type Owner struct {
	Swarm    string `json:"swarm"`
	Instance string `json:"instance"`
	Agent    string `json:"agent"`
}

// Status is where a changeset is.
type Status string

const (
	// StatusOpen: edits are taken; a commit may land it.
	StatusOpen Status = "open"
	// StatusCommitted: it landed; a repeated commit answers the stored
	// result.
	StatusCommitted Status = "committed"
)

// Edit is one file a changeset changed: its new content (a blob in the
// repository's objects) or its deletion.
type Edit struct {
	Blob    string `json:"blob,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// Changeset is the stored record of one changeset: a copy-on-write view of
// its base commit. Reads fall through to the base; writes are blobs named
// here. Nothing of it is visible to anyone until a commit lands it.
type Changeset struct {
	ID    string          `json:"id"`
	Owner Owner           `json:"owner"`
	Base  string          `json:"base"` // the commit it is on (sha); a conflict moves it to the head it merged
	Edits map[string]Edit `json:"edits,omitempty"`
	// Conflicts are the files a commit found changed on both sides; their
	// content in the changeset carries conflict markers until edited.
	Conflicts []string `json:"conflicts,omitempty"`
	Status    Status   `json:"status"`
	// Result is what the commit that landed it answered (committed only).
	Result  *Result   `json:"result,omitempty"`
	TurnID  string    `json:"turnId,omitempty"` // the turn that opened it
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Expires is when an abandoned changeset is removed (open), or when the
	// record of a landed one is (committed).
	Expires time.Time `json:"expires"`
	// Version is the record's version, for compare-and-swap; Records sets
	// it.
	Version int64 `json:"version"`
}

// Records stores changeset records.
type Records interface {
	// Create stores a new changeset (Version 1); ErrExists if its id is
	// taken.
	Create(ctx context.Context, cs Changeset) error
	// Get returns changeset id; ErrNotFound when there is none (or it was
	// removed).
	Get(ctx context.Context, id string) (Changeset, error)
	// Put replaces changeset cs.ID when its stored version is expect,
	// storing it as version expect+1; ErrVersion when another write came
	// first, ErrNotFound when it is gone.
	Put(ctx context.Context, cs Changeset, expect int64) error
	// Delete removes changeset id; no error when it is gone.
	Delete(ctx context.Context, id string) error
	// Expired lists at most limit ids whose Expires is before t.
	Expired(ctx context.Context, t time.Time, limit int) ([]string, error)
}

var (
	// ErrNotFound: no such changeset.
	ErrNotFound = errors.New("changeset: not found")
	// ErrExists: the id is taken.
	ErrExists = errors.New("changeset: id exists")
	// ErrVersion: the record changed since it was read.
	ErrVersion = errors.New("changeset: the record changed concurrently")
)
