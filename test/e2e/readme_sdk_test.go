package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// sdkBlock is a fenced code block the README and the docs copy from an
// SDK's README: `<!-- sdk/<lang>/README.md runs this: NAME -->` (or
// `binds these: NAME`, the Python README's names its snippets are run
// with) above it.
var sdkBlock = regexp.MustCompile("(?s)<!-- (sdk/(?:python|typescript)/README\\.md) (runs this|binds these): ([\\w.-]+) -->\n```(\\w+)\n(.*?)```")

// sdkReadmeBlock is the same marker in an SDK's own README, where its
// integration suite runs the block against a real agentauth (sdk/TESTING.md).
var sdkReadmeBlock = regexp.MustCompile("(?s)<!-- sdk test (runs this|binds these): ([\\w.-]+) -->\n```(\\w+)\n(.*?)```")

// TestDocsSDKSnippetsAreTheOnesTheSuitesRun keeps the SDK snippets of the
// README and docs/ from drifting: each is, character for character, the
// block of that name in the SDK's README, which that SDK's integration
// suite runs against agentauth serve and the emulated AWS stack
// (TestSDKs, TestDeployedSDKs). The README shows the SDKs first in each
// walkthrough: the token, the turn and the tools, in both languages.
func TestDocsSDKSnippetsAreTheOnesTheSuitesRun(t *testing.T) {
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	runnable := map[string]map[string]string{} // SDK README → "kind:name" → block
	for _, readme := range []string{"sdk/python/README.md", "sdk/typescript/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, readme))
		if err != nil {
			t.Fatal(err)
		}
		runnable[readme] = map[string]string{}
		for _, m := range sdkReadmeBlock.FindAllStringSubmatch(string(b), -1) {
			runnable[readme][m[1]+":"+m[2]] = m[4]
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	seen := map[string]bool{}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range sdkBlock.FindAllStringSubmatch(string(b), -1) {
			readme, kind, name, body := m[1], m[2], m[3], m[5]
			want, ok := runnable[readme][kind+":"+name]
			switch {
			case !ok:
				t.Errorf("%s copies %q from %s, which has no block marked `sdk test %s: %s` (so no suite runs it)", rel, name, readme, kind, name)
			case body != want:
				t.Errorf("%s's %q differs from %s's, the one its suite runs: copy it again\n--- %s\n%s--- %s\n%s", rel, name, readme, rel, body, readme, want)
			}
			if rel == "README.md" {
				seen[readme+" "+name] = true
			}
		}
	}
	for _, want := range []string{
		"sdk/python/README.md names", "sdk/python/README.md token", "sdk/python/README.md turns", "sdk/python/README.md tools",
		"sdk/typescript/README.md tokens", "sdk/typescript/README.md turns", "sdk/typescript/README.md tools",
	} {
		if !seen[want] {
			t.Errorf("the README does not show %s (the walkthroughs show the SDKs first)", want)
		}
	}
	// The README's SDK snippet comes before the curl of the same step.
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	for _, pair := range [][2]string{
		{"sdk/python/README.md runs this: token -->", "test/e2e runs this: token-request -->"},
		{"sdk/typescript/README.md runs this: tools -->", "JWT=$(curl"},
		{"sdk/typescript/README.md runs this: turns -->", "bin/agentauth send --swarm default"},
	} {
		i, j := strings.Index(string(readme), pair[0]), strings.Index(string(readme), pair[1])
		if i < 0 || j < 0 || i > j {
			t.Errorf("README.md: %q should come before %q (at %d, %d)", pair[0], pair[1], i, j)
		}
	}
}
