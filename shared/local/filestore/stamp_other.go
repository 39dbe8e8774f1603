//go:build !unix

package filestore

import "io/fs"

// Windows and the rest have no inode in FileInfo; size and nanosecond mtime
// remain.
func inodeOf(fs.FileInfo) uint64 { return 0 }
