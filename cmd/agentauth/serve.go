package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/toolsapi"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

// cleanupEvery is how often the server sweeps sessions.
const cleanupEvery = time.Minute

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve")
	bundleDir := fs.String("bundle", defaultBundle(), "bundle directory")
	home := fs.String("home", defaultHome(), "agentauth home")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	publicURL := fs.String("public-url", "", "public base URL for callbacks (default http://<addr>)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Sprintf("serve: --log-level %q: want debug, info, warn or error", *level)}
	}
	log := logging.New(stdout, lvl)

	unlock, err := lockHome(*home, false)
	if err != nil {
		return err
	}
	defer unlock()
	b, err := loadBundle(*bundleDir, *home)
	if err != nil {
		return err
	}
	for _, w := range b.Warnings {
		log.Warn("bundle warning", "warning", w)
	}
	h, err := openHome(ctx, *home, true)
	if err != nil {
		return err
	}
	tok, created, err := runtimeToken(*home)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	base, err := callbackBase(*publicURL, ln.Addr().(*net.TCPAddr))
	if err != nil {
		ln.Close()
		return err
	}
	mgr, err := oauth.New(oauth.Config{
		Bundle:    b,
		Store:     h.Store,
		Sealer:    h.Keyring,
		Queue:     h.Queue,
		StateKeys: h.Keyring.DerivedKeys("state"),
		BaseURL:   base,
		Logger:    log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	api, err := httpapi.New(mgr, b, httpapi.BearerToken{Token: tok}, log)
	if err != nil {
		ln.Close()
		return err
	}
	toolsNote, err := mountTools(ctx, api, b, mgr, h, stdout, log)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      oauth.MaxWait + 15*time.Second, // long polls
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n, err := mgr.ResumeDevicePollers(ctx); err != nil {
		log.Warn("device pollers not resumed", "err", err)
	} else if n > 0 {
		log.Info("device pollers resumed", "sessions", n)
	}
	go sweep(ctx, mgr, log)

	tokenNote := "in " + filepath.Join(*home, "runtime-token")
	switch {
	case created:
		tokenNote = "created in " + filepath.Join(*home, "runtime-token")
	case envSet("AGENTAUTH_RUNTIME_TOKEN"):
		tokenNote = "from AGENTAUTH_RUNTIME_TOKEN"
	}
	fmt.Fprintf(stderr, "agentauth listening on %s (bundle %s, revision %.12s, %d OAuthApps; home %s; key %s; runtime token %s; %s)\n",
		base, *bundleDir, b.Revision, len(b.OAuthApps), *home, h.Keyring.CurrentID(), tokenNote, toolsNote)
	log.Info("agentauth started", "addr", ln.Addr().String(), "publicUrl", base, "bundleRevision", b.Revision, "oauthApps", len(b.OAuthApps), "keyId", h.Keyring.CurrentID())

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
	_ = mgr.Close(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// mountTools adds the tool routes when AGENTAUTH_JWKS_URL is set, on the
// home's store (uploads) and a file rate limiter shared by every server on
// this home. It returns a note for the start line.
func mountTools(ctx context.Context, api *httpapi.Server, b *bundle.Bundle, mgr *oauth.Manager, h *embedded.Backends, stdout io.Writer, log *slog.Logger) (string, error) {
	tools, env, err := toolsapi.FromEnv(ctx, os.Getenv, toolsapi.Deps{Bundle: b, Tokens: mgr, Tenants: h.Store,
		Limiter: h.ToolLimiter, Stdout: stdout, Function: "serve", Log: log})
	if err != nil {
		return "", fmt.Errorf("tool routes:\n%w", err)
	}
	if tools == nil {
		return "tool routes off (set " + toolsapi.EnvJWKSURL + ")", nil
	}
	api.Mount(tools.Register)
	note := fmt.Sprintf("tool routes on: %d tools, %d skills", len(b.Tools), len(b.Skills))
	if env.Seam {
		note += ", RFC 0064 seam on"
	}
	return note, nil
}

// sweep runs session cleanup now and then.
func sweep(ctx context.Context, mgr *oauth.Manager, log *slog.Logger) {
	t := time.NewTicker(cleanupEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rep, err := mgr.CleanupExpiredSessions(ctx)
			if err != nil {
				log.Warn("session cleanup failed", "err", err)
				continue
			}
			if rep != (oauth.CleanupReport{}) {
				log.Info("session cleanup", "expired", rep.Expired, "deleted", rep.Deleted, "eventsDelivered", rep.EventsDelivered, "unreadable", rep.Unreadable)
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
			return "", usageError{fmt.Sprintf("serve: --public-url %q: want an absolute http(s) URL without query", public)}
		}
		return strings.TrimRight(public, "/"), nil
	}
	if addr.IP.IsUnspecified() {
		return "", usageError{fmt.Sprintf("serve: listening on %s (all interfaces): set --public-url to the address browsers use to reach this server", addr)}
	}
	return "http://" + addr.String(), nil
}
