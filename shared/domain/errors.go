package domain

import "errors"

// Sentinel errors that adapters translate their backend errors into, so that
// callers can use errors.Is without knowing which backend they talk to.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a conditional write lost (version moved, session no
	// longer pending, lease held by someone else, record already exists).
	ErrConflict = errors.New("conflict")
	// ErrCorrupt: a stored record exists but cannot be decoded or opened.
	ErrCorrupt = errors.New("corrupt record")
	// ErrInvalidID: an id failed validation (wrong shape, path traversal).
	ErrInvalidID = errors.New("invalid id")
)
