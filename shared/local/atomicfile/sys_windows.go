//go:build windows

package atomicfile

import (
	"io/fs"
	"os"
	"syscall"
	"unsafe"
)

const (
	locksExclude = true
	// A file open elsewhere cannot always be removed on Windows; a leftover
	// lock file is harmless.
	removeLockFiles = false
)

// LockFileEx through kernel32 directly keeps this package on the standard
// library.
var procLockFileEx = syscall.NewLazyDLL("kernel32.dll").NewProc("LockFileEx")

const (
	lockfileFailImmediately = 0x1
	lockfileExclusiveLock   = 0x2
	errorLockViolation      = syscall.Errno(33)
	errorIOPending          = syscall.Errno(997)
)

func tryLock(f *os.File) (bool, error) {
	var ol syscall.Overlapped
	r, _, err := procLockFileEx.Call(f.Fd(), lockfileExclusiveLock|lockfileFailImmediately,
		0, 1, 0, uintptr(unsafe.Pointer(&ol)))
	switch {
	case r != 0:
		return true, nil
	case err == errorLockViolation || err == errorIOPending:
		return false, nil
	default:
		return false, &fs.PathError{Op: "LockFileEx", Path: f.Name(), Err: err}
	}
}

// Windows cannot fsync a directory; rename is durable there without it.
func syncDir(string) error { return nil }

// openNoFollow: Windows opens have no O_NOFOLLOW; CheckPrivateDir still
// refuses linked state directories.
const openNoFollow = 0

// ownerOf: owners are not compared on Windows (ACLs, not modes).
func ownerOf(os.FileInfo) (int, bool) { return 0, false }

// modesMeanAccess: Windows reports 0777 for directories: access is ACLs.
const modesMeanAccess = false
