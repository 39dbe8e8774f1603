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
	"os"
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
	// stream reads event streams: no time limit on the whole answer,
	// only on its headers (follow drops a stream that goes silent).
	stream *http.Client
}

// clientFlags binds --home and --url.
func clientFlags(fs *flag.FlagSet, cfg *config.Config) *string {
	homeFlag(fs, cfg)
	return fs.String("url", "http://127.0.0.1:8080", "`URL` the base URL of the running agentauth serve")
}

// newClient finds the runtime token as the server does (never creating
// one: a token the server does not know would only be refused).
func newClient(cfg config.Config, base string) (*apiClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{msg: fmt.Sprintf("--url %q: want the server's base URL, like http://127.0.0.1:8080", base)}
	}
	tok, err := storedRuntimeToken(cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no runtime token in %s: start `agentauth serve --home %s` once, or set %s", cfg.Home, cfg.Home, config.RuntimeToken)
	}
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	return &apiClient{base: strings.TrimRight(base, "/"), token: tok, http: &http.Client{Timeout: 30 * time.Second},
		stream: &http.Client{Transport: tr}}, nil
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
	if resp.StatusCode/100 != 2 {
		return answerError(method, path, resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// answerError is the error of an answer that is not a 2xx: the server's
// error body, quoted.
func answerError(method, path string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e httpx.ErrorBody
	if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	return fmt.Errorf("HTTP %d %s: %s (request id %s)", resp.StatusCode, e.Error.Code, e.Error.Message, e.Error.RequestID)
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

// target is the instance a command acts on (the list's filters) and
// the server's base URL.
type target struct {
	base              *string
	swarm, key, agent string
}

// targetFlags binds --swarm, --instance and --agent (for list, filters),
// --url and --home.
func targetFlags(fs *flag.FlagSet, cfg *config.Config, filter bool) *target {
	t := &target{base: clientFlags(fs, cfg)}
	what := [3]string{"`SWARM` the instance's swarm", "`KEY` the instance key, e.g. a chat thread's id", "`AGENT` the instance's agent"}
	if filter {
		what = [3]string{"`SWARM` list only this swarm's instances", "`KEY` list only the instances of this key", "`AGENT` list only this agent's instances"}
	}
	fs.StringVar(&t.swarm, "swarm", "", what[0])
	fs.StringVar(&t.key, "instance", "", what[1])
	fs.StringVar(&t.agent, "agent", "", what[2])
	return t
}

// sendCommand posts a user's message.
func sendCommand() command {
	return command{name: "send", env: true, args: `"text"`, argsAbout: "the message", required: []string{"swarm", "instance"},
		summary: "post a user's message to an agent instance; prints the event's id",
		about: `The swarm's ingress rules pick the agent unless --agent names one; stderr says which. The turn
			acts for whom --user, --claims or --auth-file say, else for no one; access policies match the
			claims, so a turn without claims sees no tool. For the example bundle's whoami tool:
			--user demo:user:alice --claims '{"sub":"alice","scope":"profile.read"}'.

			The message is one argument, after the flags. Follow its turn with agentauth instances events
			--follow.`,
		bind: func(fs *flag.FlagSet, cfg *config.Config) action {
			base := clientFlags(fs, cfg)
			var o sendOptions
			fs.StringVar(&o.swarm, "swarm", "", "`SWARM` the swarm to post to")
			fs.StringVar(&o.key, "instance", "", "`KEY` the instance key, e.g. a chat thread's id")
			fs.StringVar(&o.agent, "agent", "", "`AGENT` one of the swarm's agents (default: the swarm's ingress rules pick)")
			fs.StringVar(&o.user, "user", "", "`ID` the user the turn acts for: auth.actor (a user) and auth.subjects.user, whose OAuth grants its tools use")
			fs.StringVar(&o.claims, "claims", "", "`JSON` the user's verified claims, a JSON object: what access policies match and tools' scopes come from")
			fs.StringVar(&o.authFile, "auth-file", "", "`PATH` a JSON file holding the whole auth object (actor, subjects, claims); - reads it from stdin. Not with --user or --claims")
			return func(ctx context.Context, std stdio, args []string) error {
				c, err := newClient(*cfg, *base)
				if err != nil {
					return err
				}
				return cmdSend(ctx, c, o, args[0], std)
			}
		}}
}

// sendOptions are send's flags.
type sendOptions struct{ swarm, key, agent, user, claims, authFile string }

// maxAuthFile bounds --auth-file: the server takes request bodies of at
// most 64 KiB.
const maxAuthFile = 64 << 10

// turnAuth is the auth object send posts: --auth-file's, else made of
// --user and --claims.
func (o sendOptions) turnAuth(stdin io.Reader) (domain.TurnAuth, error) {
	var auth domain.TurnAuth
	if o.authFile != "" {
		if o.user != "" || o.claims != "" {
			return auth, usageError{msg: "send: --auth-file holds the whole auth object: put the user and the claims in it, not in --user or --claims"}
		}
		return readAuthFile(o.authFile, stdin)
	}
	if o.user != "" {
		auth.Actor = &domain.Actor{Type: "user", ID: o.user}
		auth.Subjects = &domain.Subjects{User: o.user}
	}
	if o.claims != "" {
		var claims map[string]any
		if err := decodeStrict([]byte(o.claims), &claims); err != nil || claims == nil {
			if err == nil {
				err = errors.New("null is no object")
			}
			return auth, usageError{msg: fmt.Sprintf(`send: --claims: want the user's claims as a JSON object, like '{"sub":"alice","scope":"profile.read"}': %v`, err)}
		}
		auth.Claims = claims
	}
	return auth, nil
}

// readAuthFile reads --auth-file (- for stdin): one JSON object with
// actor, subjects and claims, each optional, and nothing else.
func readAuthFile(path string, stdin io.Reader) (domain.TurnAuth, error) {
	var auth domain.TurnAuth
	var raw []byte
	var err error
	name := path
	if path == "-" {
		name = "stdin"
		raw, err = io.ReadAll(io.LimitReader(stdin, maxAuthFile+1))
	} else {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			raw, err = io.ReadAll(io.LimitReader(f, maxAuthFile+1))
			f.Close()
		}
	}
	if err != nil {
		return auth, fmt.Errorf("send: --auth-file: %w", err)
	}
	if len(raw) > maxAuthFile {
		return auth, fmt.Errorf("send: --auth-file %s: more than %d KiB (the server takes no larger request)", name, maxAuthFile>>10)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return auth, fmt.Errorf(`send: --auth-file %s: want one JSON object, like {"actor":{"type":"user","id":"alice"},"subjects":{"user":"demo:user:alice"},"claims":{"sub":"alice"}}`, name)
	}
	if err := decodeStrict(raw, &auth); err != nil {
		return auth, fmt.Errorf("send: --auth-file %s: %w (want actor, subjects and claims)", name, err)
	}
	return auth, nil
}

// decodeStrict decodes one JSON value with no unknown field and nothing
// after it, keeping numbers as they are written.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more after the JSON value")
	}
	return nil
}

// cmdSend posts a user's message to a swarm instance and prints the
// event's id.
func cmdSend(ctx context.Context, c *apiClient, o sendOptions, text string, std stdio) error {
	auth, err := o.turnAuth(std.in)
	if err != nil {
		return err
	}
	// The origin names no connector: a CLI message has nowhere to be
	// delivered back to (the answer is in the turn's events).
	body := map[string]any{"text": text, "auth": auth, "origin": map[string]string{"via": "cli"}}
	if o.agent != "" {
		body["agent"] = o.agent
	}
	var out struct{ EventID, Swarm, InstanceKey, Agent string }
	if err := c.call(ctx, "POST", "/v1/instances/"+segment(o.swarm)+"/"+segment(o.key)+"/events", body, &out); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	fmt.Fprintln(std.out, out.EventID)
	fmt.Fprintf(std.err, "queued for %s/%s/%s\n", out.Swarm, out.InstanceKey, out.Agent)
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

// instanceCommands are the instances commands, over the API.
func instanceCommands() []command {
	all := []string{"swarm", "instance", "agent"}
	// on is an instance command that needs the whole instance key.
	on := func(name, summary, about string, extra func(fs *flag.FlagSet) func(ctx context.Context, c *apiClient, t *target, std stdio) error) command {
		return command{name: "instances " + name, env: true, required: all, summary: summary, about: about,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				t := targetFlags(fs, cfg, false)
				act := extra(fs)
				return func(ctx context.Context, std stdio, _ []string) error {
					c, err := newClient(*cfg, *t.base)
					if err != nil {
						return err
					}
					if err := act(ctx, c, t, std); err != nil {
						return fmt.Errorf("instances %s: %w", name, err)
					}
					return nil
				}
			}}
	}
	post := func(op string) func(*flag.FlagSet) func(context.Context, *apiClient, *target, stdio) error {
		return func(fs *flag.FlagSet) func(context.Context, *apiClient, *target, stdio) error {
			var reason *string
			if op == "terminate" {
				reason = fs.String("reason", "", "`TEXT` why: kept with the interrupted turn (at most 1,000 bytes)")
			}
			return func(ctx context.Context, c *apiClient, t *target, std stdio) error {
				var body any
				if reason != nil && *reason != "" {
					body = map[string]string{"reason": *reason}
				}
				var out instanceView
				if err := c.call(ctx, "POST", instancePath(t.swarm, t.key, t.agent)+"/"+op, body, &out); err != nil {
					return err
				}
				fmt.Fprintf(std.out, "%s/%s/%s: %s\n", out.Swarm, out.InstanceKey, out.Agent, out.Status)
				return nil
			}
		}
	}
	return []command{
		{name: "instances list", env: true, summary: "list the agent instances: swarm, key, agent, status, active turn",
			about: `Instances the server cannot read are named after the table, with the reason.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				t := targetFlags(fs, cfg, true)
				return func(ctx context.Context, std stdio, _ []string) error {
					c, err := newClient(*cfg, *t.base)
					if err != nil {
						return err
					}
					return listInstances(ctx, c, t.swarm, t.key, t.agent, std.out)
				}
			}},
		on("inspect", "print an instance as JSON: status, active turn, backlog, recent turns and their final answers", "",
			func(*flag.FlagSet) func(context.Context, *apiClient, *target, stdio) error {
				return func(ctx context.Context, c *apiClient, t *target, std stdio) error {
					var raw json.RawMessage
					if err := c.call(ctx, "GET", instancePath(t.swarm, t.key, t.agent), nil, &raw); err != nil {
						return err
					}
					var pretty bytes.Buffer
					_ = json.Indent(&pretty, raw, "", "  ")
					fmt.Fprintln(std.out, pretty.String())
					return nil
				}
			}),
		on("events", "print a turn's events as JSON lines — the latest turn's unless --turn names one",
			`With --follow it follows the turn live until it ends (Server-Sent Events; a dropped stream is
			resumed where it stopped, and no event is printed twice). stderr names the turn.`,
			func(fs *flag.FlagSet) func(context.Context, *apiClient, *target, stdio) error {
				turnID := fs.String("turn", "", "`ID` the turn (default: the instance's latest: its active turn, else the last ended)")
				follow := fs.Bool("follow", false, "follow the turn until it ends")
				return func(ctx context.Context, c *apiClient, t *target, std stdio) error {
					return turnEvents(ctx, c, t, *turnID, *follow, std)
				}
			}),
		on("pause", "hold an instance: its turn stops at the next step boundary, events wait", "", post("pause")),
		on("resume", "let a paused instance run again: its turn, then what waited, in order", "", post("resume")),
		on("terminate", "end an instance: its turn is interrupted and nothing runs for it again",
			`A message posted to it afterwards is refused (409 instanceTerminated); delete the instance
			to start the conversation over on its key.`, post("terminate")),
		on("delete", "remove an instance and its history; its OAuth grants are kept",
			`The grants belong to the subjects, not to the instance: revoke one with POST /v1/oauth/revoke.
			The next message to the key starts a new conversation.`,
			func(*flag.FlagSet) func(context.Context, *apiClient, *target, stdio) error {
				return func(ctx context.Context, c *apiClient, t *target, std stdio) error {
					if err := c.call(ctx, "DELETE", instancePath(t.swarm, t.key, t.agent), nil, nil); err != nil {
						return err
					}
					fmt.Fprintf(std.out, "deleted %s/%s/%s and its history; its OAuth grants are kept\n", t.swarm, t.key, t.agent)
					return nil
				}
			}),
	}
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
