//go:build !unix && !windows

package filestore

import (
	"io/fs"
	"os"
)

// Without file locks only goroutines of one process are excluded (by the
// in-process mutex); run a single process per home on such platforms.
func tryFlock(*os.File) (bool, error) { return true, nil }

func removeLockFile(path string) { os.Remove(path) }

func syncDir(string) error { return nil }

func inodeOf(fs.FileInfo) uint64 { return 0 }
