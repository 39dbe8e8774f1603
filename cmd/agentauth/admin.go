package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

// homeCommands are the commands on the local home (and keys rewrap,
// which works on the AWS deployment the environment names).
func homeCommands() []command {
	return []command{
		{name: "runtime-token", env: true, summary: "print the local runtime token, creating it on first use",
			about: `Callers of the runtime routes send it as "Authorization: Bearer <token>". It is
				$AGENTAUTH_RUNTIME_TOKEN when set, else the one in <home>/runtime-token (0600).`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				return func(_ context.Context, std stdio, _ []string) error { return cmdRuntimeToken(*cfg, std.out) }
			}},
		{name: "grants list", env: true, summary: "list the stored grants: id, app, subject, scopes, expiry — never a token",
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				asJSON := fs.Bool("json", false, "print JSON lines instead of a table")
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdGrantsList(ctx, *cfg, *asJSON, std.out, std.err)
				}
			}},
		{name: "events list", env: true, summary: "print the events waiting in the home's queue (auth.granted, posted messages), as JSON lines",
			about: `These are the queue's events, before the turn worker takes them; a turn's own events are
				printed by agentauth instances events.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdEventsList(ctx, *cfg, std.out, std.err)
				}
			}},
		{name: "sessions cleanup", env: true, summary: "sweep the OAuth consent sessions once, as serve does every minute",
			about: `Expires pending sessions, settles exchanges a crash interrupted, delivers auth.granted
				events whose first delivery failed and deletes finished sessions after their retention.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				bundleFlag(fs, cfg)
				return func(ctx context.Context, std stdio, _ []string) error {
					return cmdSessionsCleanup(ctx, *cfg, std.out, std.err)
				}
			}},
		{name: "keys rotate", env: true, summary: "write a new master key, keep the old one readable and reseal every record",
			about: `Stop agentauth serve first: it holds the home. With $GOONDAN_OAUTH_KEY set, agentauth
				cannot change the key: run agentauth keys generate, put the new key first in the variable
				and run agentauth keys reseal instead.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				return func(ctx context.Context, std stdio, _ []string) error { return cmdKeysRotate(ctx, *cfg, std.out) }
			}},
		{name: "keys reseal", env: true, summary: "reseal every record under the current master key",
			about: `Run it after putting a new key first in $GOONDAN_OAUTH_KEY; records stay readable
				under the old keys until it has run. Stop agentauth serve first.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				return func(ctx context.Context, std stdio, _ []string) error { return cmdKeysReseal(ctx, *cfg, std.out) }
			}},
		{name: "keys generate", summary: "print a new master key for $GOONDAN_OAUTH_KEY",
			bind: func(*flag.FlagSet, *config.Config) action {
				return func(_ context.Context, std stdio, _ []string) error { return cmdKeysGenerate(std.out) }
			}},
		{name: "keys rewrap", env: true, required: []string{"to-key"},
			summary: "AWS: move every grant of the deployment to another KMS key",
			about: `The deployment is the one the functions' variables name: AGENTAUTH_TABLE,
				AGENTAUTH_KMS_KEY_ID, AGENTAUTH_QUEUE_URL and AGENTAUTH_SESSION_KEYS_SECRET.
				Run it again to finish after an error: records already moved stay readable.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				to := fs.String("to-key", "", "the KMS `KEY` (id, ARN or alias) to move every grant to")
				return func(ctx context.Context, std stdio, _ []string) error { return cmdKeysRewrap(ctx, *cfg, *to, std.out) }
			}},
	}
}

func cmdRuntimeToken(cfg config.Config, stdout io.Writer) error {
	tok, _, err := runtimeToken(cfg)
	if err != nil {
		return err
	}
	// Printing it is this command's purpose: the operator asked for it.
	fmt.Fprintln(stdout, tok.Reveal())
	return nil
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func cmdGrantsList(ctx context.Context, cfg config.Config, asJSON bool, stdout, stderr io.Writer) error {
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	grants, bad, err := h.Store.ListGrants(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, g := range grants {
			// Only metadata: the sealed values stay out even when sealed.
			_ = enc.Encode(map[string]any{
				"grantId": g.ID, "oauthAppRef": g.OAuthAppRef, "provider": g.Provider, "subject": g.Subject,
				"flow": g.Flow, "scopesGranted": g.ScopesGranted, "tokenType": g.Token.TokenType,
				"expiresAt": g.Token.ExpiresAt, "hasRefreshToken": g.Token.RefreshToken != nil,
				"revoked": g.Revoked, "revokedAt": g.RevokedAt, "updatedAt": g.UpdatedAt,
				"keyId": g.Token.AccessToken.KeyID, "version": g.Version,
			})
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GRANT\tAPP\tSUBJECT\tSCOPES\tEXPIRES\tREFRESH\tREVOKED\tKEY\tUPDATED")
		for _, g := range grants {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%v\t%s\t%s\n", g.ID, g.OAuthAppRef.Name, g.Subject,
				strings.Join(g.ScopesGranted, " "), fmtTime(g.Token.ExpiresAt), g.Token.RefreshToken != nil,
				g.Revoked, orDash(g.Token.AccessToken.KeyID), fmtTime(&g.UpdatedAt))
		}
		tw.Flush()
	}
	for _, e := range bad {
		fmt.Fprintf(stderr, "unreadable: %v\n", e)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdEventsList(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	events, err := h.Queue.List(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if len(events) == 0 {
		fmt.Fprintln(stderr, "no events queued")
	}
	return nil
}

func cmdSessionsCleanup(ctx context.Context, cfg config.Config, stdout, stderr io.Writer) error {
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	// Nothing is served: Build without a runtime credential refuses every
	// runtime caller.
	log := logging.New(stderr, slog.LevelWarn)
	be, err := localBackends(ctx, cfg, h, log)
	if err != nil {
		return err
	}
	a, err := app.Build(ctx, cfg, be, log, app.Options{})
	if err != nil {
		return err
	}
	rep, err := a.Sweep(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, rep)
	return nil
}

func cmdKeysRotate(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	if !cfg.MasterKey.IsZero() {
		return fmt.Errorf("the master key comes from %s, which agentauth cannot change: run `agentauth keys generate`, set %s=<new>,<old keys…> and run `agentauth keys reseal`", config.MasterKey, config.MasterKey)
	}
	unlock, err := lockHome(cfg.Home, true)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := openHome(ctx, cfg, false); err != nil { // every record readable before we touch anything
		return err
	}
	newID, oldID, err := aesseal.Rotate(cfg.Home)
	if err != nil {
		return err
	}
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	n, err := h.Store.Reseal(ctx, h.Keyring)
	if err != nil {
		return fmt.Errorf("new key %s is in place and old key %s stays readable, but resealing stopped: %w (run `agentauth keys reseal` to finish)", newID, oldID, err)
	}
	fmt.Fprintf(stdout, "rotated: current key %s, old key %s kept readable in oauth/keys/retired/; resealed %d values\n", newID, oldID, n)
	return nil
}

func cmdKeysReseal(ctx context.Context, cfg config.Config, stdout io.Writer) error {
	unlock, err := lockHome(cfg.Home, true)
	if err != nil {
		return err
	}
	defer unlock()
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	n, err := h.Store.Reseal(ctx, h.Keyring)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "resealed %d values under key %s\n", n, h.Keyring.CurrentID())
	return nil
}

func cmdKeysGenerate(stdout io.Writer) error {
	k, err := aesseal.NewKeyString()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, k)
	return nil
}

// cmdKeysRewrap moves every grant of the AWS deployment named by the
// environment (the functions' variables) to another KMS key.
func cmdKeysRewrap(ctx context.Context, cfg config.Config, to string, stdout io.Writer) error {
	if cfg.AWS == nil {
		return fmt.Errorf("keys rewrap works on the AWS deployment named by the functions' variables: set %s, %s, %s and %s", config.Table, config.KMSKeyID, config.QueueURL, config.SessionKeysSecret)
	}
	be, err := app.OpenAWS(ctx, *cfg.AWS, nil)
	if err != nil {
		return err
	}
	n, err := be.Rewrap(ctx, to)
	if err != nil {
		return fmt.Errorf("rewrap stopped after %d values: %w (run it again to finish; records already moved stay readable)", n, err)
	}
	fmt.Fprintf(stdout, "rewrapped %d values under %s; set %s to it for the functions\n", n, to, config.KMSKeyID)
	return nil
}
