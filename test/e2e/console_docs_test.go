package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestDocsConsoleFromMakeRun runs docs/console.md's "Open it" against
// make run (scripts/run.sh on free ports): the marked curl answers what
// the page says it answers, and an operator signs in as the page says —
// admin at the demo provider — and lands on the overview as a platform
// admin; acme-admin as the admin of tenant acme; alice is refused.
func TestDocsConsoleFromMakeRun(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	requireCommand(t, "bash", "curl")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	blocks := docSnippets(t, "docs/console.md")
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "console.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("answers `(303 [^`]+)`").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/console.md does not say what the console-redirect curl answers")
	}
	r := startMakeRun(t, freePort(t), freePort(t))
	d := newDocRun(t, r)
	got := strings.TrimSpace(d.run(t, "console-redirect", blocks["console-redirect"], nil))
	if want := strings.ReplaceAll(string(m[1]), readmeAgentauthAddr, r.Addr); got != want {
		t.Fatalf("console-redirect answered %q; docs/console.md says %q", got, want)
	}
	base := "http://" + r.Addr
	browser := e2ekit.StartBrowser(t)
	for _, tc := range []struct{ login, want string }{
		{"admin", "platform admin"},
		{"acme-admin", "admin of tenant acme"},
		{"alice", "not an agentauth operator"},
	} {
		t.Run(tc.login, func(t *testing.T) {
			s, err := browser.NewSession(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := s.Drive(ctx, base+"/console/", tc.login, func(res e2ekit.Result) bool {
				return strings.HasPrefix(res.FinalURL, base+"/console/") && !strings.HasPrefix(res.FinalURL, base+"/console/signin")
			})
			if err != nil {
				t.Fatalf("sign in as %s: %v", tc.login, err)
			}
			if !strings.Contains(res.BodyText, tc.want) {
				t.Fatalf("signed in as %s at %s: %q", tc.login, e2ekit.RedactURL(res.FinalURL), res.BodyText)
			}
		})
	}
	// The banner says where the console is and how to sign in.
	if !strings.Contains(r.Out.String(), "operator console: "+base+"/console/ (sign in at the demo provider as admin") {
		t.Fatalf("the make run banner does not name the console:\n%s", r.Out)
	}
}
