package origin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docRecipe is the first fenced block of lang in docs/turns.md's section
// "Verifying a delivery": the recipe a receiver copies.
func docRecipe(t *testing.T, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "turns.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Verifying a delivery\n")
	if !ok {
		t.Fatal("docs/turns.md has no section \"Verifying a delivery\"")
	}
	_, block, ok := strings.Cut(section, "```"+lang+"\n")
	if !ok {
		t.Fatalf("the section has no %s block", lang)
	}
	code, _, ok := strings.Cut(block, "```")
	if !ok {
		t.Fatalf("the %s block is not closed", lang)
	}
	return code
}

// TestDocRecipes runs the documented Python and Node verifications
// against a real delivery: they accept it, and refuse it tampered with,
// under another secret and when it is old; their key is the delivery's
// id, and a replay under another X-Agentauth-Delivery (which no
// signature covers) keeps it, so the recipe drops it as handled.
// Skipped without the interpreter.
func TestDocRecipes(t *testing.T) {
	rv := newReceiver(t)
	var logs logBuffer
	d := start(t, testConfig(&logs, connector("chat", rv.srv.URL)))
	d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": "chat", "channel": "C123"}), turnEvents("turn-1")[4:5])
	closeNow(t, d)
	got := rv.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	real := got[0]
	ts, sig, key := real.header.Get(HeaderTimestamp), real.header.Get(HeaderSignature), real.header.Get(HeaderDelivery)
	old := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)

	for _, rt := range []struct {
		lang, interpreter, driver string
	}{
		{"python", "python3", `
import os, sys
body = open(sys.argv[1], "rb").read()
print("ok " + delivery_key(body) if verify(os.environ["SECRET"].encode(), os.environ["TS"], os.environ["SIG"], body) else "refused")
`},
		{"js", "node", `
const body = require("node:fs").readFileSync(process.argv[2]);
console.log(verify(process.env.SECRET, process.env.TS, process.env.SIG, body) ? "ok " + deliveryKey(body) : "refused");
`},
	} {
		t.Run(rt.lang, func(t *testing.T) {
			bin, err := exec.LookPath(rt.interpreter)
			if err != nil {
				t.Skipf("no %s: %v", rt.interpreter, err)
			}
			dir := t.TempDir()
			script := filepath.Join(dir, "verify."+map[string]string{"python": "py", "js": "js"}[rt.lang])
			if err := os.WriteFile(script, []byte(docRecipe(t, rt.lang)+rt.driver), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, secret, ts, sig string
				body                  []byte
				want                  string
			}{
				{"the delivery as sent", testSecret, ts, sig, real.body, "ok " + key},
				// The driver is handed the replay's header as the receiver
				// would be; the recipe's key comes from the signed body.
				{"a replay under another X-Agentauth-Delivery", testSecret, ts, sig, real.body, "ok " + key},
				{"the body tampered with", testSecret, ts, sig, []byte(strings.Replace(string(real.body), "alice", "mallory", 1)), "refused"},
				{"another secret", testSecret + "x", ts, sig, real.body, "refused"},
				{"another timestamp", testSecret, strconv.FormatInt(time.Now().Unix()+1, 10), sig, real.body, "refused"},
				{"an hour old, signed right", testSecret, old, Sign(testSecret, old, real.body), real.body, "refused"},
				{"no v1= prefix", testSecret, ts, strings.TrimPrefix(sig, "v1="), real.body, "refused"},
				{"no signature", testSecret, ts, "", real.body, "refused"},
				{"a malformed timestamp", testSecret, "+" + ts, Sign(testSecret, "+"+ts, real.body), real.body, "refused"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					bodyFile := filepath.Join(dir, "body")
					if err := os.WriteFile(bodyFile, tc.body, 0o600); err != nil {
						t.Fatal(err)
					}
					cmd := exec.Command(bin, script, bodyFile)
					delivery := key
					if strings.HasPrefix(tc.name, "a replay") {
						delivery = "replayed-as-new:1"
					}
					cmd.Env = append(os.Environ(), "SECRET="+tc.secret, "TS="+tc.ts, "SIG="+tc.sig, "DELIVERY="+delivery)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s", rt.interpreter, err, out)
					}
					if got := strings.TrimSpace(string(out)); got != tc.want {
						t.Errorf("the %s recipe says %q, want %q", rt.lang, got, tc.want)
					}
				})
			}
		})
	}
}
