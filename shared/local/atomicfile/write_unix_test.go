//go:build linux || darwin || freebsd

package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The write-failure test re-runs this test binary as a child whose file
// size limit (RLIMIT_FSIZE) makes every write past 1 KiB fail with EFBIG,
// which provokes a failure in the middle of WriteTemp without any hook.
const (
	fsizeChildOp   = "ATOMICFILE_TEST_FSIZE_OP"
	fsizeChildPath = "ATOMICFILE_TEST_FSIZE_PATH"
)

func TestFileSizeLimitChild(t *testing.T) {
	op, path := os.Getenv(fsizeChildOp), os.Getenv(fsizeChildPath)
	if op == "" {
		t.Skip("helper for TestWriteFailureKeepsOldAndCleansUp")
	}
	signal.Ignore(syscall.SIGXFSZ) // get EFBIG instead of being killed
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1024, Max: 1024}); err != nil {
		fmt.Println("RESULT setrlimit", err)
		return
	}
	data := bytes.Repeat([]byte("new secret "), 1024)
	var err error
	switch op {
	case "replace":
		err = Replace(path, data, 0o600)
	case "create":
		err = CreateExclusive(path, data, 0o600)
	}
	if err == nil {
		fmt.Println("RESULT ok")
		return
	}
	fmt.Println("RESULT failed", err)
}

func TestWriteFailureKeepsOldAndCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, tc := range []struct {
		op       string
		existing bool
	}{
		{"replace", true},
		{"replace", false},
		{"create", false},
	} {
		t.Run(fmt.Sprintf("%s existing=%v", tc.op, tc.existing), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tc.existing {
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestFileSizeLimitChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), fsizeChildOp+"="+tc.op, fsizeChildPath+"="+path)
			out, err := cmd.CombinedOutput()
			i := bytes.Index(out, []byte("RESULT "))
			if i < 0 {
				t.Fatalf("child: %v\n%s", err, out)
			}
			result, _, _ := strings.Cut(string(out[i:]), "\n")
			if !strings.HasPrefix(result, "RESULT failed") || !strings.Contains(result, "too large") {
				t.Fatalf("want a write failure (EFBIG), got %q", result)
			}
			if strings.Contains(result, "new secret") {
				t.Fatalf("error carries the content: %q", result)
			}
			if tc.existing {
				wantContent(t, path, "old")
			} else if _, err := os.Lstat(path); err == nil {
				t.Fatal("a failed write created the target")
			}
			noTemps(t, dir)
		})
	}
}
