package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// cleanupEvery is how often the server sweeps sessions.
const cleanupEvery = time.Minute

// serveOptions are serve's flags beyond the configuration.
type serveOptions struct {
	addr, level, debugAddr string
	idleRelease            time.Duration
}

// serveCommands are the servers: agentauth itself and the demo's
// scripted model.
func serveCommands() []command {
	return []command{
		{name: "serve", env: true, summary: "run agentauth locally: every route in one process, its state in the home",
			about: `The OAuth runtime routes and the callback, the tool routes when $AGENTAUTH_JWKS_URL is set,
				and — when the bundle has a Swarm — the turn routes and the turn worker. Several servers may
				share a home. Logs are JSON lines on stdout; the start line goes to stderr.

				Every variable agentauth reads is in docs/configuration.md.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				var o serveOptions
				bundleFlag(fs, cfg)
				homeFlag(fs, cfg)
				fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "the `HOST:PORT` to listen on")
				fs.StringVar(&cfg.PublicURL, "public-url", cfg.PublicURL, "the public base `URL` providers redirect browsers to (default http://<addr>)")
				fs.StringVar(&o.level, "log-level", "info", "`LEVEL` the least severe level logged: debug, info, warn or error")
				fs.StringVar(&o.debugAddr, "debug-addr", "", "serve /debug/vars (goroutines, heap, GC) and /debug/pprof on this loopback `HOST:PORT`, e.g. 127.0.0.1:6060 (default: off)")
				fs.DurationVar(&o.idleRelease, "idle-release", defaultIdleRelease, "after `DURATION` with no request, drop the in-memory caches and return the memory to the OS (0: never)")
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdServe(ctx, *cfg, o, std.out, std.err)
				}
			}},
		{name: "scripted-model", summary: "serve the scripted model — NOT a language model: a fixed script, for make run and the tests",
			about: `It speaks the OpenAI chat-completions and Bedrock Converse wire formats and answers every
				request from a fixed script; it understands nothing. --script demo (make run's) calls whoami and
				names the user, so the example bundle's Agent runs with no model account. --script self-change
				is the end-to-end tests' agent changing its own bundle (docs/changesets.md): "change yourself"
				opens a changeset, writes tools/gamma.yaml (tool=NAME, file=PATH, description=WORD,
				source=SOURCE in the message change it), commits and answers "committed git:<sha>" or "not
				committed: <code>"; "prepare a change" stops before the commit; "commit changeset=ID"
				commits; "what tools" names the tools it was offered. Its test hook, GET /debug/requests
				(loopback callers only), lists what it received: the user's words, the tools offered and
				called, never a header. Point the bundle's Model at a real endpoint to use a language model.`,
			bind: func(fs *flag.FlagSet, _ *config.Config) action {
				addr := fs.String("addr", scripted.DemoAddr, "the `HOST:PORT` to listen on")
				script := fs.String("script", scripted.ScriptNames()[0], "the `NAME` of the script: "+strings.Join(scripted.ScriptNames(), " or "))
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdScriptedModel(ctx, *addr, *script, std.out, std.err)
				}
			}},
	}
}

// bundleFlag binds --bundle to cfg.BundleDir.
func bundleFlag(fs *flag.FlagSet, cfg *config.Config) {
	fs.StringVar(&cfg.BundleDir, "bundle", cfg.BundleDir, "the bundle: a `DIR` of YAML files")
}

func cmdServe(ctx context.Context, cfg config.Config, o serveOptions, stdout, stderr io.Writer) error {
	addr, debugAddr := &o.addr, &o.debugAddr
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.level)); err != nil {
		return usageError{msg: fmt.Sprintf("serve: --log-level %q: want debug, info, warn or error", o.level)}
	}
	if *debugAddr != "" {
		if err := checkDebugAddr(*debugAddr); err != nil {
			return err
		}
	}
	if o.idleRelease < 0 {
		return usageError{msg: fmt.Sprintf("serve: --idle-release %s: want a duration ≥ 0 (0: never release)", o.idleRelease)}
	}
	if cfg.AWS != nil {
		return usageError{msg: fmt.Sprintf("serve runs on the embedded backends in --home; unset %s (the AWS backends are for the Lambda functions)", config.Table)}
	}
	log := logging.New(stdout, lvl)

	unlock, err := lockHome(cfg.Home, false)
	if err != nil {
		return err
	}
	defer unlock()
	h, err := openHome(ctx, cfg, true)
	if err != nil {
		return err
	}
	tok, created, err := runtimeToken(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	defer ln.Close()
	if cfg.PublicURL, err = callbackBase(cfg.PublicURL, ln.Addr().(*net.TCPAddr)); err != nil {
		return err
	}
	be, err := localBackends(ctx, cfg, h, log)
	if err != nil {
		return err
	}
	a, err := app.Build(ctx, cfg, be, log,
		app.Options{RuntimeAuth: httpapi.BearerToken{Token: tok}, Function: "serve", MetricsOut: stdout, Version: version})
	if err != nil {
		return err
	}
	handler := a.Handler()
	if o.idleRelease > 0 {
		idle := newIdleRelease(o.idleRelease, h.ReleaseCaches, log)
		handler = idle.wrap(handler)
		t := time.NewTicker(max(o.idleRelease/3, time.Second))
		defer t.Stop()
		go idle.run(ctx, t.C)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      oauth.MaxWait + 15*time.Second, // long polls
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n, err := a.OAuth.ResumeDevicePollers(ctx); err != nil {
		log.Warn("device pollers not resumed", "err", err)
	} else if n > 0 {
		log.Info("device pollers resumed", "sessions", n)
	}
	go sweep(ctx, a, log)
	if a.Turns != nil {
		// The turn worker: the home's queue → the engine, per instance in
		// order, instances in parallel (several servers on one home share
		// the work through per-instance locks).
		w := &queueworker.Worker{Queue: h.Queue, Handle: a.Turns.Engine.Handle, KeyOf: engine.KeyOf,
			Dir: h.WorkerDir, Log: log, Wake: h.Queue.Wake()}
		go w.Run(ctx)
	}

	fmt.Fprintf(stderr, "agentauth listening on %s (bundle %s, revision %.12s, %d OAuthApps; home %s; key %s; runtime token %s; %s; %s)\n",
		cfg.PublicURL, cfg.BundleDir, a.Bundle.Revision, len(a.Bundle.OAuthApps), cfg.Home, h.Keyring.CurrentID(), tokenNote(cfg, created), toolsNote(cfg, a), turnsNote(a))
	log.Info("agentauth started", "addr", ln.Addr().String(), "publicUrl", cfg.PublicURL, "bundleRevision", a.Bundle.Revision, "oauthApps", len(a.Bundle.OAuthApps), "keyId", h.Keyring.CurrentID())

	if *debugAddr != "" {
		dln, dsrv, err := listenDebug(*debugAddr)
		if err != nil {
			return err
		}
		defer dsrv.Close()
		go func() { _ = dsrv.Serve(dln) }()
		log.Info("debug endpoints on", "addr", dln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("agentauth stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	_ = a.Close(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// tokenNote says where the runtime token came from, for the start line.
func tokenNote(cfg config.Config, created bool) string {
	path := filepath.Join(cfg.Home, "runtime-token")
	switch {
	case created:
		return "created in " + path
	case !cfg.RuntimeToken.IsZero():
		return "from " + config.RuntimeToken
	}
	return "in " + path
}

// turnsNote says whether agents run, for the start line.
func turnsNote(a *app.App) string {
	if a.Turns == nil {
		return "turns off (no Swarm in the bundle)"
	}
	return fmt.Sprintf("turns on: %d swarms, %d agents, worker running", len(a.Bundle.Swarms), len(a.Bundle.Agents))
}

// toolsNote says whether the tool routes are on, for the start line.
func toolsNote(cfg config.Config, a *app.App) string {
	if a.Tools == nil {
		return "tool routes off (set " + config.JWKSURL + ")"
	}
	note := fmt.Sprintf("tool routes on: %d tools, %d skills", len(a.Bundle.Tools), len(a.Bundle.Skills))
	if cfg.Tools.Seam {
		note += ", RFC 0064 seam on"
	}
	return note
}

// sweep runs session cleanup now and then.
func sweep(ctx context.Context, a *app.App, log *slog.Logger) {
	t := time.NewTicker(cleanupEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep, err := a.Sweep(ctx)
			if err != nil {
				log.Warn("session cleanup failed", "err", err)
				continue
			}
			if rep != (oauth.CleanupReport{}) {
				log.Info("session cleanup", "sweep", rep)
			}
		}
	}
}

// callbackBase is the public URL providers redirect browsers to: the
// --public-url, else the listen address — which must then be one a browser
// can reach, not a wildcard.
func callbackBase(public string, addr *net.TCPAddr) (string, error) {
	if public != "" {
		u, err := url.Parse(public)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return "", usageError{msg: fmt.Sprintf("serve: --public-url %q: want an absolute http(s) URL without query", public)}
		}
		return strings.TrimRight(public, "/"), nil
	}
	if addr.IP.IsUnspecified() {
		return "", usageError{msg: fmt.Sprintf("serve: listening on %s (all interfaces): set --public-url to the address browsers use to reach this server", addr)}
	}
	return "http://" + addr.String(), nil
}
