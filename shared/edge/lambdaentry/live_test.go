package lambdaentry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
)

// gitBundle makes a copy of the test bundle a git repository (its files
// the first revision) and points the function's environment at it.
func gitBundle(t *testing.T) string {
	t.Helper()
	functionEnv(t)
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/bundle/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bundlerepo.Init(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.Bundle, dir)
	return dir
}

// localGit opens the embedded backends of the test's home with the git
// bundle's changesets, as serve does (the functions open the AWS ones).
func localGit(ctx context.Context, cfg config.Config) (*app.Backends, error) {
	h, err := app.OpenEmbedded(ctx, cfg, true)
	if err != nil {
		return nil, err
	}
	be := app.FromEmbedded(h, cfg.LocalSecrets())
	repo, recs, err := bundlerepo.OpenLocal(ctx, cfg.BundleDir, cfg.Home, nil)
	if err != nil {
		return nil, err
	}
	be.Changesets = &app.Changesets{Repo: repo, Records: recs, Describe: "git main"}
	return be, nil
}

// commitApp lands a revision that adds OAuthApp/<name>, as a changeset
// would (another process: the function learns of it from the head only).
func commitApp(t *testing.T, dir, name string) string {
	t.Helper()
	repo, err := bundlerepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	app, err := os.ReadFile(filepath.Join(dir, "app.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	added := strings.NewReplacer("name: team", "name: "+name, "/oauth/callback/team", "/oauth/callback/"+name).Replace(string(app))
	h, err := changeset.CommitTree(context.Background(), repo, []changeset.ImportFile{
		{Path: "app.yaml", Data: app}, {Path: name + ".yaml", Data: []byte(added)}}, "add OAuthApp/"+name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return changeset.Ref(h)
}

// tokenFor asks the runtime function for a token of OAuthApp/<app>.
func tokenFor(t *testing.T, l *live, app string) (int, string) {
	t.Helper()
	ev := event(t)
	ev.Body = strings.Replace(ev.Body, "OAuthApp/team", "OAuthApp/"+app, 1)
	raw, _ := json.Marshal(ev)
	out, err := l.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.APIGatewayV2HTTPResponse)
	return resp.StatusCode, resp.Body
}

// callbackAt asks the callback function for GET <path> (no state: a
// route that exists answers 400, one that does not 404).
func callbackAt(t *testing.T, l *live, path string) int {
	t.Helper()
	ev := event(t)
	ev.RawPath, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path, ev.Body = path, "GET", path, ""
	raw, _ := json.Marshal(ev)
	out, err := l.Invoke(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return out.(events.APIGatewayV2HTTPResponse).StatusCode
}

// TestFunctionsFollowTheActiveRevision: a revision that adds an OAuthApp,
// committed while the token and callback functions run, is served by both
// within AGENTAUTH_UPLOADS_CHECK_SECONDS (1 s here) of the commit, with no
// cold start; the log says when it was taken up.
func TestFunctionsFollowTheActiveRevision(t *testing.T) {
	dir := gitBundle(t)
	t.Setenv(config.UploadsCheckSeconds, "1")
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx := context.Background()
	gettoken, err := start(ctx, os.Getenv, RuntimeRoutes, "gettoken", log, Options{Backends: localGit})
	if err != nil {
		t.Fatal(err)
	}
	callback, err := start(ctx, os.Getenv, CallbackRoutes, "callback", log, Options{Backends: localGit})
	if err != nil {
		t.Fatal(err)
	}
	first := gettoken.current(ctx).app.Bundle.Revision
	if !changeset.IsGitRef(first) {
		t.Fatalf("first revision %q: not the git bundle's", first)
	}
	if code, body := tokenFor(t, gettoken, "other"); code != 200 || !strings.Contains(body, "oauthAppNotFound") {
		t.Fatalf("before the commit: %d %s", code, body)
	}
	if code := callbackAt(t, callback, "/oauth/callback/other"); code != 404 {
		t.Fatalf("callback before the commit: %d", code)
	}
	rev := commitApp(t, dir, "other")
	committed := time.Now()
	bound := time.Second
	var tokenAt, callbackAt2 time.Duration
	for tokenAt == 0 || callbackAt2 == 0 {
		if time.Since(committed) > bound+2*time.Second {
			t.Fatalf("not taken up within %s: token %s, callback %s", bound, tokenAt, callbackAt2)
		}
		if code, body := tokenFor(t, gettoken, "other"); tokenAt == 0 && code == 200 && strings.Contains(body, "authorization_required") {
			tokenAt = time.Since(committed)
		}
		if code := callbackAt(t, callback, "/oauth/callback/other"); callbackAt2 == 0 && code != 404 {
			callbackAt2 = time.Since(committed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The check runs on an invocation once per bound: an invocation that
	// starts a whole bound after the commit runs on it; the rebuild adds
	// its own few milliseconds.
	slack := 250 * time.Millisecond
	if tokenAt > bound+slack || callbackAt2 > bound+slack {
		t.Fatalf("taken up after %s (token) and %s (callback), bound %s", tokenAt, callbackAt2, bound)
	}
	t.Logf("FIGURE pickup: token route %s, callback route %s after the commit (bound %s)", tokenAt.Round(time.Millisecond), callbackAt2.Round(time.Millisecond), bound)
	if got := gettoken.current(ctx).app.Bundle.Revision; got != rev {
		t.Fatalf("running %s, want %s", got, rev)
	}
	if !strings.Contains(logs.String(), `"msg":"bundle revision taken up"`) || !strings.Contains(logs.String(), rev) {
		t.Fatalf("log: %s", logs.String())
	}
	// The old app still answers for the team app: nothing was lost.
	if code, body := tokenFor(t, gettoken, "team"); code != 200 {
		t.Fatalf("team after the swap: %d %s", code, body)
	}
}

// TestLiveKeepsTheRunningFunction: a head that cannot be read, or a
// revision that cannot be built, keeps the function built before, and the
// check runs again only after the bound.
func TestLiveKeepsTheRunningFunction(t *testing.T) {
	functionEnv(t)
	f, err := build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	var heads, builds int
	headErr := errors.New("GetItem: throttled")
	l := &live{every: 10 * time.Second, now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler),
		head: func(context.Context) (string, error) {
			heads++
			if heads == 1 {
				return "", headErr
			}
			return "git:" + strings.Repeat("b", 40), nil
		},
		rebuild: func(context.Context) (*function, error) {
			builds++
			return nil, fmt.Errorf("bundle: %w", &bundle.ValidationError{})
		}}
	l.cur.Store(f)
	l.checked = now
	ctx := context.Background()
	for i, step := range []struct {
		advance       time.Duration
		heads, builds int
	}{
		{0, 0, 0},                // within the bound: no read
		{10 * time.Second, 1, 0}, // head unreadable
		{time.Second, 1, 0},      // within the bound again
		{10 * time.Second, 2, 1}, // moved, the build fails
		{10 * time.Second, 3, 2}, // tried again after the bound
	} {
		now = now.Add(step.advance)
		if got := l.current(ctx); got != f || heads != step.heads || builds != step.builds {
			t.Fatalf("step %d: same %v, heads %d builds %d, want %d %d", i, got == f, heads, builds, step.heads, step.builds)
		}
	}
	// A plain directory is never checked.
	plain := newLive(f, nil, time.Nanosecond, slog.New(slog.DiscardHandler))
	if plain.head != nil || plain.current(ctx) != f {
		t.Fatal("a plain bundle directory is followed")
	}
}
