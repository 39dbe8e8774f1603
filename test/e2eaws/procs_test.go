//go:build e2eaws

package e2eaws

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MiniStack runs a provided.al2023 function's bootstrap as a host process,
// a child of the emulator, one per execution environment, and hands each
// environment one invocation at a time. lambdaEnvs finds the environments
// of function fn of the emulator whose pid file sits next to its log, and
// how many bytes each has read so far (/proc/<pid>/io rchar): an idle
// environment is parked in its Runtime API long poll and reads nothing, so
// an environment whose count moved served an invocation meanwhile. It
// returns nil where /proc is not available (not Linux).
func lambdaEnvs(s *stack, fn string) map[int]int64 {
	parent := 0
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(s.MiniStackLog), "pid")); err == nil {
		parent, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := map[int]int64{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		vars := bytes.Split(env, []byte{0})
		var name, endpoint bool
		for _, v := range vars {
			name = name || string(v) == "AWS_LAMBDA_FUNCTION_NAME="+fn
			endpoint = endpoint || string(v) == "AWS_ENDPOINT_URL="+s.Endpoint
		}
		if !name || !endpoint {
			continue
		}
		if parent != 0 && ppid(pid) != parent {
			continue // another emulator's environment of a same-named function
		}
		io, err := os.ReadFile(filepath.Join("/proc", d.Name(), "io"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(io), "\n") {
			if v, ok := strings.CutPrefix(line, "rchar: "); ok {
				out[pid], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return out
}

func ppid(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// envsServed compares two lambdaEnvs snapshots: how many environments
// existed before, and how many served at least one invocation in between
// (their read count moved, or they are new).
func envsServed(before, after map[int]int64) (pool, served int) {
	for pid, n := range after {
		if b, ok := before[pid]; !ok || n != b {
			served++
		}
	}
	return len(before), served
}
