package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports (the kernel converts to it whatever
// its own HZ), so it needs no sysconf.
const clockTicks = 100

// maxHomeEntries bounds one walk of the home.
const maxHomeEntries = 5_000_000

// resources is one reading of the server process and its home.
type resources struct {
	at       time.Time
	cpuTicks uint64 // utime + stime
	rssKiB   int64
	threads  int
	fds      int
	files    int            // regular files under the home
	bytes    int64          // their sizes
	dirs     map[string]int // files per directory kind of the home (dirKind)
	// From serve's /debug/vars (see stack.read).
	goroutines int
	heapInuse  uint64 // bytes in in-use heap spans
}

// readResources reads /proc/<pid>/stat, /proc/<pid>/status and
// /proc/<pid>/fd, and walks home.
func readResources(pid int, home string) (resources, error) {
	r := resources{at: time.Now()}
	proc := fmt.Sprintf("/proc/%d", pid)
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return r, fmt.Errorf("read %s/stat: %w", proc, err)
	}
	if r.cpuTicks, err = cpuTicks(string(stat)); err != nil {
		return r, fmt.Errorf("%s/stat: %w", proc, err)
	}
	status, err := os.Open(proc + "/status")
	if err != nil {
		return r, err
	}
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			r.rssKiB, _ = strconv.ParseInt(fields[0], 10, 64)
		case "Threads":
			r.threads, _ = strconv.Atoi(fields[0])
		}
	}
	status.Close()
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return r, fmt.Errorf("read %s/fd: %w", proc, err)
	}
	r.fds = len(fds)
	r.files, r.bytes, r.dirs, err = countFiles(home)
	return r, err
}

// cpuTicks is utime + stime of a /proc/<pid>/stat line (fields 14 and 15;
// the command name, field 2, may hold spaces and parentheses, so fields
// are counted after its last ')').
func cpuTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields, want at least 15", len(f)+2)
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + s, nil
}

// countFiles counts the regular files under root, in total and per
// directory kind (dirKind).
func countFiles(root string) (files int, bytes int64, dirs map[string]int, err error) {
	dirs = map[string]int{}
	seen := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			// A file removed while walking is the server at work.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if seen++; seen > maxHomeEntries {
			return fmt.Errorf("more than %d entries under %s", maxHomeEntries, root)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		files++
		if info, err := d.Info(); err == nil {
			bytes += info.Size()
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		dirs[dirKind(rel)]++
		return nil
	})
	return files, bytes, dirs, err
}

// cpuPercent is the CPU used between two readings, in percent of one core.
func cpuPercent(a, b resources) float64 {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 || b.cpuTicks < a.cpuTicks {
		return 0
	}
	return float64(b.cpuTicks-a.cpuTicks) / clockTicks / wall * 100
}

// hashLike is a path component made of many hex digits: an id or a hash
// that names one record's directory.
var hashLike = regexp.MustCompile(`^[0-9a-f]{16,}$`)

// dirKind names a directory of the home by its kind: its first two
// components, an id or hash among them shown as *, so that
// turns/3fa4…/ and turns/91bc…/ are both turns/*.
func dirKind(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) > 2 {
		parts = parts[:2]
	}
	for i, p := range parts {
		if hashLike.MatchString(p) {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, "/")
}
