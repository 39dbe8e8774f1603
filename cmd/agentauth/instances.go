package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// apiClient calls the runtime routes of a running local server with the
// home's runtime token: the admin commands that act on agent instances
// go through the same API as any other caller.
type apiClient struct {
	base  string
	token domain.Secret
	http  *http.Client
}

// clientFlags binds --home and --url.
func clientFlags(fs *flag.FlagSet, cfg *config.Config) *string {
	homeFlag(fs, cfg)
	return fs.String("url", "http://127.0.0.1:8080", "base URL of the running agentauth serve")
}

// newClient finds the runtime token as the server does (never creating
// one: a token the server does not know would only be refused).
func newClient(cfg config.Config, base string) (*apiClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Sprintf("--url %q: want the server's base URL, like http://127.0.0.1:8080", base)}
	}
	tok, err := storedRuntimeToken(cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no runtime token in %s: start `agentauth serve --home %s` once, or set %s", cfg.Home, cfg.Home, config.RuntimeToken)
	}
	if err != nil {
		return nil, err
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: tok, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// call sends body (nil: none) and decodes a 2xx answer into out; any
// other answer is an error quoting the server's error body.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is `agentauth serve` running at %s?)", err, c.base)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e httpx.ErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d %s: %s (request id %s)", resp.StatusCode, e.Error.Code, e.Error.Message, e.Error.RequestID)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// segment escapes one path segment; "." and ".." are escaped too, which
// url.PathEscape leaves as they are and an HTTP path would drop.
func segment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

func instancePath(swarm, key, agent string) string {
	return "/v1/instances/" + segment(swarm) + "/" + segment(key) + "/" + segment(agent)
}

// cmdSend posts a user's message to a swarm instance and prints the
// event's id.
func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	fs := newFlags("send")
	base := clientFlags(fs, &cfg)
	swarm := fs.String("swarm", "", "swarm (required)")
	key := fs.String("instance", "", "instance key, e.g. a chat thread's id (required)")
	agent := fs.String("agent", "", "one of the swarm's agents (default: the swarm's ingress rules decide)")
	user := fs.String("user", "", "the user the turn acts for: actor id and auth.subjects.user")
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("send: %v", err)}
	}
	if fs.NArg() != 1 {
		return usageError{"send: want the message as one argument, after the flags: agentauth send --swarm S --instance K \"text\""}
	}
	if *swarm == "" || *key == "" {
		return usageError{"send: --swarm and --instance are required"}
	}
	c, err := newClient(cfg, *base)
	if err != nil {
		return err
	}
	auth := domain.TurnAuth{}
	if *user != "" {
		auth.Actor = &domain.Actor{Type: "user", ID: *user}
		auth.Subjects = &domain.Subjects{User: *user}
	}
	// The origin names no connector: a CLI message has nowhere to be
	// delivered back to (the answer is in the turn's events).
	body := map[string]any{"text": fs.Arg(0), "auth": auth, "origin": map[string]string{"via": "cli"}}
	if *agent != "" {
		body["agent"] = *agent
	}
	var out struct{ EventID, Swarm, InstanceKey, Agent string }
	if err := c.call(ctx, "POST", "/v1/instances/"+segment(*swarm)+"/"+segment(*key)+"/events", body, &out); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	fmt.Fprintln(stdout, out.EventID)
	fmt.Fprintf(stderr, "queued for %s/%s/%s\n", out.Swarm, out.InstanceKey, out.Agent)
	return nil
}

// instanceView is the API's instance record.
type instanceView struct {
	Swarm       string    `json:"swarm"`
	InstanceKey string    `json:"instanceKey"`
	Agent       string    `json:"agent"`
	Status      string    `json:"status"`
	ActiveTurn  string    `json:"activeTurn"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// cmdInstances runs `instances <sub>` over the API.
func cmdInstances(ctx context.Context, sub string, args []string, stdout io.Writer) error {
	cfg, err := localConfig()
	if err != nil {
		return err
	}
	name := "instances " + sub
	fs := newFlags(name)
	base := clientFlags(fs, &cfg)
	swarm := fs.String("swarm", "", "swarm")
	key := fs.String("instance", "", "instance key")
	agent := fs.String("agent", "", "agent")
	reason := ""
	if sub == "terminate" {
		fs.StringVar(&reason, "reason", "", "why (kept with the interrupted turn)")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if sub == "list" {
		c, err := newClient(cfg, *base)
		if err != nil {
			return err
		}
		return listInstances(ctx, c, *swarm, *key, *agent, stdout)
	}
	if *swarm == "" || *key == "" || *agent == "" {
		return usageError{name + ": --swarm, --instance and --agent are required"}
	}
	c, err := newClient(cfg, *base)
	if err != nil {
		return err
	}
	path := instancePath(*swarm, *key, *agent)
	switch sub {
	case "inspect":
		var raw json.RawMessage
		if err := c.call(ctx, "GET", path, nil, &raw); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, raw, "", "  ")
		fmt.Fprintln(stdout, pretty.String())
	case "delete":
		if err := c.call(ctx, "DELETE", path, nil, nil); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(stdout, "deleted %s/%s/%s and its history; its OAuth grants are kept\n", *swarm, *key, *agent)
	default: // pause, resume, terminate
		var body any
		if reason != "" {
			body = map[string]string{"reason": reason}
		}
		var out instanceView
		if err := c.call(ctx, "POST", path+"/"+sub, body, &out); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(stdout, "%s/%s/%s: %s\n", out.Swarm, out.InstanceKey, out.Agent, out.Status)
	}
	return nil
}

// listInstances prints the instances as a table, those of swarm, key and
// agent when set, and then a line for each instance the server could not
// read (one whose key the server does not know passes every filter).
func listInstances(ctx context.Context, c *apiClient, swarm, key, agent string, stdout io.Writer) error {
	var out struct {
		Data       []instanceView
		Unreadable []struct{ Swarm, InstanceKey, Agent, ID, Reason string }
	}
	if err := c.call(ctx, "GET", "/v1/instances", nil, &out); err != nil {
		return fmt.Errorf("instances list: %w", err)
	}
	skip := func(s, k, a string) bool {
		return swarm != "" && s != swarm || key != "" && k != key || agent != "" && a != agent
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SWARM\tINSTANCE\tAGENT\tSTATUS\tACTIVE TURN\tUPDATED")
	for _, in := range out.Data {
		if skip(in.Swarm, in.InstanceKey, in.Agent) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.Swarm, in.InstanceKey, in.Agent, in.Status, orDash(in.ActiveTurn), fmtTime(&in.UpdatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range out.Unreadable {
		name := "instance " + u.ID
		if u.Swarm != "" {
			if skip(u.Swarm, u.InstanceKey, u.Agent) {
				continue
			}
			name = fmt.Sprintf("%s/%s/%s (%s)", u.Swarm, u.InstanceKey, u.Agent, u.ID)
		}
		fmt.Fprintf(stdout, "unreadable: %s: %s\n", name, u.Reason)
	}
	return nil
}
