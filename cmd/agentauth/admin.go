package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

func cmdRuntimeToken(args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("runtime-token")
	homeFlag(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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

func cmdGrantsList(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("grants list")
	homeFlag(fs, &cfg)
	asJSON := fs.Bool("json", false, "JSON lines instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	grants, bad, err := h.Store.ListGrants(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
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
		fmt.Fprintf(os.Stderr, "unreadable: %v\n", e)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdEventsList(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("events list")
	homeFlag(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
		fmt.Fprintln(os.Stderr, "no events queued")
	}
	return nil
}

func cmdSessionsCleanup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("sessions cleanup")
	homeFlag(fs, &cfg)
	fs.StringVar(&cfg.BundleDir, "bundle", cfg.BundleDir, "bundle directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return err
	}
	// Nothing is served: Build without a runtime credential refuses every
	// runtime caller.
	a, err := app.Build(ctx, cfg, app.FromEmbedded(h, cfg.LocalSecrets()), logging.New(stderr, slog.LevelWarn), app.Options{})
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

func cmdKeysRotate(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("keys rotate")
	homeFlag(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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

func cmdKeysReseal(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("keys reseal")
	homeFlag(fs, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
func cmdKeysRewrap(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("keys rewrap")
	to := fs.String("to-key", "", "KMS key id, ARN or alias to move every grant to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *to == "" {
		return usageError{"keys rewrap: --to-key is required"}
	}
	if cfg.AWS == nil {
		return fmt.Errorf("keys rewrap works on the AWS deployment named by the functions' variables: set %s, %s, %s and %s", config.Table, config.KMSKeyID, config.QueueURL, config.SessionKeysSecret)
	}
	be, err := app.OpenAWS(ctx, *cfg.AWS, nil)
	if err != nil {
		return err
	}
	n, err := be.Rewrap(ctx, *to)
	if err != nil {
		return fmt.Errorf("rewrap stopped after %d values: %w (run it again to finish; records already moved stay readable)", n, err)
	}
	fmt.Fprintf(stdout, "rewrapped %d values under %s; set %s to it for the functions\n", n, *to, config.KMSKeyID)
	return nil
}
