package e2ekit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SyncBuffer collects a process's output; safe for concurrent use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *SyncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *SyncBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// The independent MCP clients (test/e2e/mcpclients), installed by `make
// mcp-client-deps`.
const (
	mcpPythonVersion = "2.3.0" // = MCP_PY_VERSION in the Makefile
	mcpClientsDir    = "test/e2e/mcpclients"
	// MCPOpTimeout bounds each operation a client is asked for.
	MCPOpTimeout = 60 * time.Second
)

// MCPClientKind is one of the independent MCP clients: how to run it.
type MCPClientKind struct {
	Name  string
	Argv  []string // the interpreter and the script; the URL follows
	Flags []string // after the URL
}

// MCPClientKinds finds the Python and TypeScript clients; a missing one
// skips the test (fails it with E2E_REQUIRE=1).
func MCPClientKinds(t testing.TB) []MCPClientKind {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, mcpClientsDir)
	python := filepath.Join(root, ".tools", "mcp-python-"+mcpPythonVersion, "bin", "python")
	var missing []string
	for _, need := range []string{
		filepath.Join(root, ".tools", "mcp-python-"+mcpPythonVersion, ".installed"),
		filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"),
	} {
		if _, err := os.Stat(need); err != nil {
			missing = append(missing, need)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node on PATH")
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the MCP clients are not installed (%s): run `make mcp-client-deps`", strings.Join(missing, ", "))
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s (%s=1, so this is a failure, not a skip)", msg, RequireEnv)
		}
		t.Skip(msg)
	}
	return []MCPClientKind{
		{Name: "python", Argv: []string{python, filepath.Join(dir, "client.py")}},
		{Name: "typescript", Argv: []string{node, filepath.Join(dir, "client.mjs")}},
	}
}

// MCPLine is one line a client printed: the result of one operation.
type MCPLine struct {
	Op                string         `json:"op"`
	OK                bool           `json:"ok"`
	Ms                float64        `json:"ms"`
	HTTPStatus        int            `json:"httpStatus"`
	WWWAuthenticate   string         `json:"wwwAuthenticate"`
	ProtocolVersion   string         `json:"protocolVersion"`
	Tools             []MCPTool      `json:"tools"`
	IsError           bool           `json:"isError"`
	Text              string         `json:"text"`
	StructuredContent map[string]any `json:"structuredContent"`
	Error             *struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data"`
		Type    string `json:"type"`
	} `json:"error"`
	Elicitations []struct {
		Mode, URL, ID, Message string
	} `json:"elicitations"`
	// Raw is the line as printed.
	Raw string
}

type MCPTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// ToolError is the error object of an isError result's structured content.
func (l MCPLine) ToolError() map[string]any {
	e, _ := l.StructuredContent["error"].(map[string]any)
	return e
}

// ErrorCode is a JSON-RPC error's code, 0 when there is none.
func (l MCPLine) ErrorCode() int {
	if l.Error == nil {
		return 0
	}
	c, _ := l.Error.Code.(float64)
	return int(c)
}

// MCPClient is a running client process: operations go in as JSON lines
// on its stdin, results come back one line each.
type MCPClient struct {
	Kind  MCPClientKind
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	// Out is all it printed, for a leak scan; Errs its stderr.
	Out, Errs *SyncBuffer
}

// StartMCPClient runs kind against url with the bearer token in its
// environment and returns it with its connect line.
func StartMCPClient(t testing.TB, kind MCPClientKind, url, token string, elicitation bool) (*MCPClient, MCPLine) {
	t.Helper()
	args := append(append(append([]string{}, kind.Argv[1:]...), url), kind.Flags...)
	if elicitation {
		args = append(args, "--elicitation")
	}
	c := &MCPClient{Kind: kind, lines: make(chan string, 16), Out: &SyncBuffer{}, Errs: &SyncBuffer{}}
	c.cmd = exec.Command(kind.Argv[0], args...)
	c.cmd.Env = append(os.Environ(), "MCP_BEARER_TOKEN="+token)
	c.cmd.Stderr = c.Errs
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start the %s MCP client: %v", kind.Name, err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.Out.Write(append(sc.Bytes(), '\n'))
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(c.Close)
	return c, c.Next(t)
}

// Next reads the client's next result line.
func (c *MCPClient) Next(t testing.TB) MCPLine {
	t.Helper()
	select {
	case raw, ok := <-c.lines:
		if !ok {
			t.Fatalf("the %s MCP client ended early:\n%s", c.Kind.Name, c.Errs)
		}
		var l MCPLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("the %s MCP client printed %q: %v", c.Kind.Name, raw, err)
		}
		l.Raw = raw
		return l
	case <-time.After(MCPOpTimeout):
		t.Fatalf("the %s MCP client did not answer within %s:\n%s", c.Kind.Name, MCPOpTimeout, c.Errs)
	}
	return MCPLine{}
}

// Do sends one operation and returns its result.
func (c *MCPClient) Do(t testing.TB, op map[string]any) MCPLine {
	t.Helper()
	b, _ := json.Marshal(op)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("write to the %s MCP client: %v\n%s", c.Kind.Name, err, c.Errs)
	}
	return c.Next(t)
}

// List asks for the tools.
func (c *MCPClient) List(t testing.TB) MCPLine { return c.Do(t, map[string]any{"op": "list"}) }

// Call calls a tool.
func (c *MCPClient) Call(t testing.TB, name string, args map[string]any) MCPLine {
	return c.Do(t, map[string]any{"op": "call", "name": name, "args": args})
}

// Close ends the client: stdin closed, then its process group killed if
// it has not exited within 10 s.
func (c *MCPClient) Close() {
	if c.cmd.Process == nil || c.cmd.ProcessState != nil {
		return
	}
	c.in.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
