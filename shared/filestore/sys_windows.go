//go:build windows

package filestore

import (
	"io/fs"
	"os"
	"syscall"
	"unsafe"
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

func tryFlock(f *os.File) (bool, error) {
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

// Lock files stay on Windows: a file open elsewhere cannot always be
// removed, and a leftover lock file is harmless.
func removeLockFile(string) {}

// Windows cannot fsync a directory; rename is still atomic there.
func syncDir(string) error { return nil }

// Windows has no inode in FileInfo; size and nanosecond mtime remain.
func inodeOf(fs.FileInfo) uint64 { return 0 }
