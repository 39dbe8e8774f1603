//go:build !unix

package aesseal

// Directory fsync and advisory locks are unix facilities; elsewhere rename
// is still atomic and Rotate relies on being run by one operator at a time.

func syncDir(string) error { return nil }

func lockPath(string) (func(), error) { return func() {}, nil }
