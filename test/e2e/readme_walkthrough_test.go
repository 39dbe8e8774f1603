package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// docRun runs the marked blocks of the docs against r as a user would
// in a second terminal: bash in a directory where bin/agentauth is the
// binary under test, the run's home as AGENTAUTH_HOME (the README's
// .agentauth), and the README's addresses replaced by the run's.
type docRun struct {
	r   *makeRun
	dir string
	env []string
}

func newDocRun(t *testing.T, r *makeRun) *docRun {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(agentauthBin, filepath.Join(dir, "bin", "agentauth")); err != nil {
		t.Fatal(err)
	}
	return &docRun{r: r, dir: dir, env: append(cleanEnv(), "AGENTAUTH_HOME="+r.Home)}
}

// run runs block (with placeholder → value pairs replaced) within a
// minute, with env added, and returns its stdout; it fails the test when
// the block fails.
func (d *docRun) run(t *testing.T, name, block string, env []string, placeholders ...string) string {
	t.Helper()
	if block == "" {
		t.Fatalf("no block marked %q", name)
	}
	script := strings.NewReplacer(append([]string{readmeAgentauthAddr, d.r.Addr, readmeProviderAddr, d.r.ProviderAddr}, placeholders...)...).Replace(block)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir, cmd.Env = d.dir, append(append([]string{}, d.env...), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", name, err, script, out, stderr.String())
	}
	return string(out)
}

// sameKeys fails the test unless got (an answer) has the members the
// README's answer shown holds, in the same order, with the same values
// where shown is not a placeholder (holding "…" or a time).
func sameKeys(t *testing.T, name, shown, got string) {
	t.Helper()
	members := func(s string) ([]string, map[string]json.RawMessage) {
		dec := json.NewDecoder(strings.NewReader(s))
		var keys []string
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("%s: not an object: %s", name, s)
		}
		vals := map[string]json.RawMessage{}
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			keys = append(keys, k.(string))
			vals[k.(string)] = v
		}
		return keys, vals
	}
	sk, sv := members(shown)
	gk, gv := members(got)
	if strings.Join(sk, ",") != strings.Join(gk, ",") {
		t.Fatalf("%s: the answer has %v; the README shows %v", name, gk, sk)
	}
	for k, v := range sv {
		if !strings.Contains(string(v), "…") && k != "expiresAt" && string(v) != string(gv[k]) {
			t.Fatalf("%s: %s is %s; the README shows %s", name, k, gv[k], v)
		}
	}
}

// jsonOut decodes a block's output, one JSON object.
func jsonOut(t *testing.T, name, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s printed %q: %v", name, out, err)
	}
	return m
}

// TestREADMETokenWalkthrough runs README.md's first walkthrough as
// written against make run (scripts/run.sh on free ports): the token
// request answers a consent link, alice consents in Chromium, the wait
// returns completed, the same request answers the token, grants list
// shows the grant and no token, the auth.granted of the request's resume
// target (the bundle's own agent, issue 18.8) is taken by the turn
// worker as the README says, and the revocation answers as shown. The
// README's error example is what the server answers.
func TestREADMETokenWalkthrough(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	requireCommand(t, "bash", "curl")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	blocks := readmeSnippets(t)
	r := startMakeRun(t, freePort(t), freePort(t))
	d := newDocRun(t, r)
	tokenFile, err := os.ReadFile(filepath.Join(r.Home, "runtime-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := "TOKEN=" + strings.TrimSpace(string(tokenFile))

	firstOut := d.run(t, "token-request", blocks["token-request"], nil)
	sameKeys(t, "token-consent-answer", blocks["token-consent-answer"], firstOut)
	first := jsonOut(t, "token-request", firstOut)
	session, _ := first["authSessionId"].(string)
	link, _ := first["authorizationUrl"].(string)
	if first["status"] != "authorization_required" || !strings.HasPrefix(session, "as-") || !strings.HasPrefix(link, "http://"+r.ProviderAddr+"/auth?") {
		t.Fatalf("token-request: %v", first)
	}
	browser := e2ekit.StartBrowser(t)
	if res, err := browser.Authorize(ctx, link, "alice"); err != nil || !strings.Contains(res.BodyText, "Connected") {
		t.Fatalf("consent as alice: %v %+v", err, res)
	}
	if done := jsonOut(t, "token-wait", d.run(t, "token-wait", blocks["token-wait"], []string{token}, "as-3f0c…", session)); done["status"] != "completed" {
		t.Fatalf("token-wait: %v", done)
	}
	readyOut := d.run(t, "token-request", blocks["token-request"], nil)
	sameKeys(t, "token-ready-answer", blocks["token-ready-answer"], readyOut)
	ready := jsonOut(t, "token-request again", readyOut)
	access, _ := ready["accessToken"].(string)
	if ready["status"] != "ready" || access == "" || ready["tokenType"] != "Bearer" {
		t.Fatalf("the same request after consent: %v", ready)
	}

	// grants list prints the table the README shows: the same header, the
	// same grant, app, subject and scopes (the times and key id differ).
	grants := d.run(t, "token-grants", blocks["token-grants"], []string{token})
	var shown []string
	for _, line := range strings.Split(blocks["token-grants"], "\n") {
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			shown = append(shown, rest)
		}
	}
	got := strings.Split(strings.TrimSpace(grants), "\n")
	if len(shown) != 2 || len(got) != 2 || strings.Contains(grants, access) {
		t.Fatalf("grants list printed:\n%s\nthe README shows:\n%s", grants, strings.Join(shown, "\n"))
	}
	upTo := strings.Index(shown[0], "EXPIRES")
	if got[0] != shown[0] || upTo < 0 || len(got[1]) < upTo || got[1][:upTo] != shown[1][:upTo] {
		t.Fatalf("grants list printed:\n%s\nthe README shows:\n%s", grants, strings.Join(shown, "\n"))
	}
	// The README: the worker took auth.granted for Swarm default, instance
	// 1700000000.000100, Agent assistant, which has no turn: dropped,
	// nothing ran.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		log := r.Out.String()
		if i := strings.Index(log, `"msg":"event for an instance that does not exist dropped"`); i >= 0 {
			line := log[i:]
			line = line[:strings.IndexByte(line, '\n')]
			if !strings.Contains(line, `"eventId":"`+session+`"`) || !strings.Contains(line, `"instance":"default/1700000000.000100/assistant"`) {
				t.Fatalf("the worker's line: %s", line)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not take auth.granted within 20 s:\n%s", log)
		}
	}
	if events := d.run(t, "events list", "bin/agentauth events list", nil); strings.Contains(events, session) {
		t.Fatalf("auth.granted still queued: %s", events)
	}

	revoked := jsonOut(t, "token-revoke", d.run(t, "token-revoke", blocks["token-revoke"], []string{token}))
	if revoked["revoked"] != true || revoked["providerRevocation"] != "revoked" || !strings.HasPrefix(revoked["grantId"].(string), "grant-") {
		t.Fatalf("token-revoke: %v", revoked)
	}
	if again := jsonOut(t, "token-request after revoke", d.run(t, "token-request", blocks["token-request"], nil)); again["status"] != "authorization_required" {
		t.Fatalf("after the revocation: %v", again)
	}

	// The README's error example, "Every route answers an error with one
	// body", is this server's answer to that mistake.
	var example struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(blocks["error-body"], "\n", 2)[0]), &example); err != nil {
		t.Fatalf("the README's error-body block: %v", err)
	}
	api := &server{URL: "http://" + r.Addr, Token: strings.TrimPrefix(token, "TOKEN=")}
	code, out := api.call(t, "POST", "/v1/oauth/token", map[string]any{"oauthAppRef": "OAuthApp/demo-user", "scope": []string{"openid"}})
	if e, _ := out["error"].(map[string]any); code != 400 || e["code"] != example.Error.Code || e["message"] != example.Error.Message {
		t.Fatalf("the server answers %d %v; the README shows %+v", code, out, example.Error)
	}
}

// TestDocsTurnsPostingAMessage runs docs/turns.md's "Posting a message"
// as written against make run (issue 18.8: it sent no claims, so the
// demo agent saw no tool): the event is queued for the assistant, the
// turn parks on alice's consent, and after it ends with the scripted
// model's answer naming Alice. The same post without claims gets the
// refusal the doc names.
func TestDocsTurnsPostingAMessage(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	requireCommand(t, "bash", "curl")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	block := docSnippets(t, "docs/turns.md")["turns-post"]
	r := startMakeRun(t, freePort(t), freePort(t))
	d := newDocRun(t, r)
	tokenFile, err := os.ReadFile(filepath.Join(r.Home, "runtime-token"))
	if err != nil {
		t.Fatal(err)
	}
	api := &server{URL: "http://" + r.Addr, Token: strings.TrimSpace(string(tokenFile))}

	// It prints what the doc shows, but for the event's id.
	out := d.run(t, "turns-post", block, []string{"TOKEN=" + api.Token})
	posted := jsonOut(t, "turns-post", out)
	id, _ := posted["eventId"].(string)
	_, shown, _ := strings.Cut(block, "\n# ")
	if !strings.HasPrefix(id, "ev-") || strings.TrimSpace(strings.Replace(out, id, "ev-5d1c…", 1)) != strings.TrimSpace(shown) {
		t.Fatalf("turns-post printed %s; the doc shows %s", out, shown)
	}
	const instance = "1712345678.000100"
	_, parked := api.waitFor(ctx, t, instance, "turn.parked")
	link, _ := parked["data"].(map[string]any)["authorizationUrl"].(string)
	if !strings.HasPrefix(link, "http://"+r.ProviderAddr+"/auth?") {
		t.Fatalf("turn.parked: %v", parked)
	}
	browser := e2ekit.StartBrowser(t)
	if res, err := browser.Authorize(ctx, link, "alice"); err != nil || !strings.Contains(res.BodyText, "Connected") {
		t.Fatalf("consent as alice: %v %+v", err, res)
	}
	_, done := api.waitFor(ctx, t, instance, "turn.completed")
	if final, _ := done["data"].(map[string]any)["final"].(string); !strings.HasPrefix(final, "You are Alice — the whoami tool says so.") {
		t.Fatalf("the answer: %q", final)
	}

	// Without the claims: the whoami call is refused as outside the
	// step's catalog.
	noClaims := strings.Replace(block, `,
                "claims": {"sub": "alice", "scope": "profile.read"}`, "", 1)
	if noClaims == block {
		t.Fatal("the block's claims were not found to take out")
	}
	d.run(t, "turns-post without claims", strings.ReplaceAll(noClaims, instance, "no-claims"), []string{"TOKEN=" + api.Token})
	_, failed := api.waitFor(ctx, t, "no-claims", "tool.failed")
	if failed["data"].(map[string]any)["code"] != "E_TOOL_NOT_IN_CATALOG" {
		t.Fatalf("without claims: %v", failed)
	}
}
