//go:build !unix && !windows

package atomicfile

import "os"

// Without file locks nothing is excluded: callers add an in-process mutex
// and run a single process per directory on such platforms.
const (
	locksExclude    = false
	removeLockFiles = true
)

func tryLock(*os.File) (bool, error) { return true, nil }

func syncDir(string) error { return nil }

// openNoFollow: the platform cannot refuse a symbolic link at open.
const openNoFollow = 0

// ownerOf: owners are not compared on this platform.
func ownerOf(os.FileInfo) (int, bool) { return 0, false }

// modesMeanAccess: modes are not checked here.
const modesMeanAccess = false
