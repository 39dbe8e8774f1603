package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// Instances, their turns and the lifecycle actions are platform-wide: an
// instance belongs to a swarm of the bundle, not to a tenant, so only a
// platform admin sees them.

type instanceRow struct {
	turn.Instance
	URL string
}

func (c *Console) instances(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform || c.cfg.Instances == nil {
		return "", nil, forbidden
	}
	ctx := r.Context()
	f := filterOf(r, "swarm", "agent", "status")
	page, err := c.cfg.Instances.QueryInstances(ctx, turn.InstanceQuery{Swarm: f["swarm"], Agent: f["agent"],
		Status: turn.InstanceStatus(f["status"]), After: r.URL.Query().Get("after"), Limit: pageSize})
	if errors.Is(err, domain.ErrInvalidID) {
		return "", nil, errNotFound
	}
	if err != nil {
		return "", nil, err
	}
	p := listPage[instanceRow]{Filter: f, Skipped: len(page.Unreadable), Options: map[string][]string{
		"status": {string(turn.Active), string(turn.Paused), string(turn.Terminated)}}}
	if c.cfg.Active != nil {
		if b, err := c.cfg.Active(ctx); err == nil {
			for name, sw := range b.Swarms {
				p.Options["swarm"] = append(p.Options["swarm"], name)
				p.Options["agent"] = append(p.Options["agent"], sw.Agents...)
			}
			for k, v := range p.Options {
				if k != "status" {
					slices.Sort(v)
					p.Options[k] = slices.Compact(v)
				}
			}
		}
	}
	for _, in := range page.Instances {
		p.Rows = append(p.Rows, instanceRow{Instance: in, URL: instancePath(in.Key)})
	}
	if page.Next != "" {
		p.Next = f.query("after", page.Next)
	}
	for _, u := range page.Unreadable {
		c.cfg.Log.WarnContext(ctx, "console list: an instance could not be read", "id", u.ID, "reason", u.Reason)
	}
	return "instances", view{Title: "Instances", Nav: "instances", Data: p}, nil
}

func keyOf(r *http.Request) (turn.InstanceKey, error) {
	k := turn.InstanceKey{Swarm: r.PathValue("swarm"), Key: r.PathValue("key"), Agent: r.PathValue("agent")}
	if k.Validate() != nil {
		return k, errNotFound
	}
	return k, nil
}

// turnRow is a turn as the instance page lists it.
type turnRow struct {
	turn.Turn
	URL     string
	Actor   string
	Tenant  string
	Latency string
}

type instanceData struct {
	Instance turn.Instance
	URL      string
	Turns    []turnRow
	Backlog  int
	Parked   []parkedCall
}

type parkedCall struct {
	Tool, CallID, Session, SessionURL string
}

func (c *Console) instance(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform {
		return "", nil, forbidden
	}
	key, err := keyOf(r)
	if err != nil {
		return "", nil, err
	}
	st, err := c.cfg.Turns.Inspect(r.Context(), key)
	if err != nil {
		return "", nil, err
	}
	d := instanceData{Instance: st.Instance, URL: instancePath(key), Backlog: len(st.Backlog)}
	for _, t := range st.Turns {
		d.Turns = append(d.Turns, c.turnRowOf(key, t))
	}
	slices.SortFunc(d.Turns, func(a, b turnRow) int { return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.ID, b.ID)) })
	for _, cl := range st.Calls {
		if cl.State == turn.CallParked {
			d.Parked = append(d.Parked, parkedCall{Tool: cl.Tool, CallID: cl.ID, Session: cl.AuthSession, SessionURL: Path + "consents/" + url.PathEscape(cl.AuthSession)})
		}
	}
	sort.Slice(d.Parked, func(i, j int) bool { return d.Parked[i].CallID < d.Parked[j].CallID })
	return "instance", view{Title: "Instance " + key.String(), Nav: "instances", Data: d}, nil
}

func (c *Console) turnRowOf(key turn.InstanceKey, t turn.Turn) turnRow {
	row := turnRow{Turn: t, URL: instancePath(key) + "/turns/" + url.PathEscape(t.ID)}
	if a := t.Auth.Actor; a != nil {
		row.Actor = a.Type + " " + a.ID
	}
	row.Tenant = tenantOfClaims(t.Auth.Claims, c.cfg.TenantClaim)
	if t.EndedAt != nil {
		row.Latency = t.EndedAt.Sub(t.StartedAt).Round(time.Millisecond).String()
	}
	return row
}

// timelineData is a turn and its events as timeline entries.
type timelineData struct {
	Turn     turnRow
	Instance string
	URL      string
	Entries  []entry
	// Live: the turn has not ended, so the page follows its events.
	Live bool
	Last int64
}

func (c *Console) timeline(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform {
		return "", nil, forbidden
	}
	key, err := keyOf(r)
	if err != nil {
		return "", nil, err
	}
	// Turn events are numbered from 0: after -1 is every one of them.
	t, evs, err := c.cfg.Turns.TurnEvents(r.Context(), key, r.PathValue("turn"), -1)
	if err != nil {
		return "", nil, err
	}
	d := timelineData{Turn: c.turnRowOf(key, t), Instance: key.String(), URL: instancePath(key), Last: -1}
	d.Entries = entries(evs)
	if len(evs) > 0 {
		d.Last = evs[len(evs)-1].Seq
	}
	d.Live = t.EndedAt == nil
	v := view{Title: "Turn " + t.ID, Nav: "instances", Data: d}
	if d.Live {
		v.Live = d.Turn.URL + "/events"
	}
	return "timeline", v, nil
}

// entry is one line of a turn's timeline.
type entry struct {
	Seq    int64
	At     time.Time
	Type   string
	Kind   string // what colour: step, tool, park, ok, fail, info
	Title  string
	Facts  []fact
	Waited string
}

type fact struct{ Name, Value string }

// entries turn a turn's events into timeline entries: each says what
// happened in words, with the figures the event carries. Only the
// fields below are read; anything else in an event (none is a secret)
// stays out of the page.
func entries(evs []turn.TurnEvent) []entry {
	var out []entry
	var parkedAt time.Time
	for _, ev := range evs {
		var d map[string]any
		_ = json.Unmarshal(ev.Data, &d)
		e := entry{Seq: ev.Seq, At: ev.At, Type: ev.Type, Kind: "info"}
		ms := func(name, key string) {
			if v, ok := d[key].(float64); ok {
				e.Facts = append(e.Facts, fact{name, msText(v)})
			}
		}
		str := func(k string) string {
			switch v := d[k].(type) {
			case string:
				return v
			case float64:
				return strconv.FormatFloat(v, 'f', -1, 64)
			case bool:
				return strconv.FormatBool(v)
			}
			return ""
		}
		add := func(name, key string) {
			if v := str(key); v != "" {
				e.Facts = append(e.Facts, fact{name, v})
			}
		}
		switch ev.Type {
		case turn.EvTurnStarted:
			e.Kind, e.Title = "step", "Turn started"
			add("input", "inputType")
		case turn.EvStepStarted:
			e.Kind, e.Title = "step", "Step "+str("step")+": the model answered"
			add("model", "model")
			add("model id", "modelId")
			add("finish reason", "finishReason")
			ms("model latency", "modelLatencyMs")
			if u, ok := d["usage"].(map[string]any); ok {
				for _, k := range [][2]string{{"promptTokens", "prompt tokens"}, {"completionTokens", "completion tokens"}} {
					if v, ok := u[k[0]].(float64); ok {
						e.Facts = append(e.Facts, fact{k[1], strconv.FormatFloat(v, 'f', -1, 64)})
					}
				}
			}
			if v := str("bundleRevision"); v != "" {
				e.Facts = append(e.Facts, fact{"revision", shortRef(v)})
			}
		case turn.EvStepCompleted:
			e.Kind, e.Title = "step", "Step "+str("step")+" completed"
			add("tool calls", "toolCalls")
			add("errors", "errors")
			ms("latency", "latencyMs")
		case turn.EvToolCalled:
			e.Kind, e.Title = "tool", "Tool call: "+str("tool")
			add("call", "callId")
			add("args hash", "argsHash")
		case turn.EvToolCompleted:
			e.Kind, e.Title = "ok", "Tool completed: "+str("tool")
			add("call", "callId")
			ms("latency", "latencyMs")
		case turn.EvToolFailed:
			e.Kind, e.Title = "fail", "Tool failed: "+str("tool")
			add("call", "callId")
			add("code", "code")
			add("message", "message")
			ms("latency", "latencyMs")
		case turn.EvTurnParked:
			e.Kind, e.Title = "park", "Parked on consent: "+str("tool")
			add("call", "callId")
			add("consent", "authSessionId")
			parkedAt = ev.At
		case turn.EvTurnResumed:
			e.Kind, e.Title = "park", "Resumed ("+cmp.Or(str("event"), "event")+")"
			add("consent", "authSessionId")
			if !parkedAt.IsZero() {
				e.Waited = ev.At.Sub(parkedAt).Round(time.Second).String()
				parkedAt = time.Time{}
			}
		case turn.EvTurnCompleted:
			e.Kind, e.Title = "ok", "Turn completed"
		case turn.EvTurnFailed, turn.EvStepLimitReached:
			e.Kind, e.Title = "fail", "Turn failed"
			if ev.Type == turn.EvStepLimitReached {
				e.Title = "Step limit reached"
			}
			if m, ok := d["error"].(map[string]any); ok {
				for _, k := range []string{"code", "message"} {
					if v, ok := m[k].(string); ok {
						e.Facts = append(e.Facts, fact{k, v})
					}
				}
			}
			add("code", "code")
		case turn.EvTurnInterrupted:
			e.Kind, e.Title = "fail", "Turn interrupted"
			add("reason", "reason")
		default:
			e.Title = strings.ReplaceAll(ev.Type, ".", " ")
			add("status", "status")
			add("revision", "newRef")
			add("changeset", "changesetId")
		}
		out = append(out, e)
	}
	return out
}

// timelineEvents streams a running turn's new timeline entries as
// Server-Sent Events of rendered HTML rows (the page appends them), from
// Last-Event-ID on: a reconnect repeats and loses nothing. Where a
// response cannot stream (behind API Gateway) each answer holds what came
// in its window and ends, and the browser's EventSource reconnects.
func (c *Console) timelineEvents(w http.ResponseWriter, r *http.Request) {
	sess, ok := c.session(r)
	if !ok || !sess.Platform {
		http.Error(w, "sign in as a platform admin", http.StatusUnauthorized)
		return
	}
	key, err := keyOf(r)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	id := r.PathValue("turn")
	after := int64(-1) // no cursor: from the turn's first event (seq 0)
	if v := cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			http.Error(w, "Last-Event-ID (or after) must be an event number", http.StatusBadRequest)
			return
		}
		after = n
	}
	if _, _, err := c.cfg.Turns.TurnEvents(r.Context(), key, id, after); err != nil {
		http.NotFound(w, r)
		return
	}
	s, err := httpx.OpenStream(w, r, c.cfg.Stream)
	if errors.Is(err, httpx.ErrNoFlush) {
		// Nothing written yet: say why, rather than leave the answer
		// without a status (a Lambda proxy's 502).
		httpx.RefuseStream(w, r)
		return
	}
	if err != nil {
		return
	}
	tmpl := c.pages["timeline"]
	_ = s.Follow(r.Context(), c.cfg.StreamPoll, func(ctx2 context.Context, s *httpx.Stream) (bool, error) {
		if c.cfg.Now().Unix() >= sess.Expires {
			// The session ended while the stream ran: it serves no more
			// (the browser's reconnect goes to the sign-in).
			return true, nil
		}
		t, evs, err := c.cfg.Turns.TurnEvents(ctx2, key, id, after)
		if err != nil {
			return true, err
		}
		for _, e := range entries(evs) {
			var b strings.Builder
			if err := tmpl.ExecuteTemplate(&b, "entry", e); err != nil {
				return true, err
			}
			if err := s.Event(strconv.FormatInt(e.Seq, 10), "entry", []byte(b.String())); err != nil {
				return true, err
			}
			after = e.Seq
		}
		if t.EndedAt != nil {
			_ = s.Event(strconv.FormatInt(after, 10), "ended", []byte(string(t.Status)))
			return true, nil
		}
		return false, nil
	})
}

// lifecycle runs pause, resume, terminate or delete on an instance.
func (c *Console) lifecycle(w http.ResponseWriter, r *http.Request, op operator) (string, error) {
	if !op.Platform {
		return "", forbidden
	}
	key, err := keyOf(r)
	if err != nil {
		return "", err
	}
	ctx := r.Context()
	action := r.PathValue("action")
	to := instancePath(key)
	switch action {
	case "pause":
		err = c.cfg.Turns.Pause(ctx, key)
	case "resume":
		err = c.cfg.Turns.Resume(ctx, key)
	case "terminate":
		reason := strings.TrimSpace(r.PostForm.Get("reason"))
		if len(reason) > 200 {
			return "", &safeError{"The reason is longer than 200 characters; nothing was changed."}
		}
		err = c.cfg.Turns.Terminate(ctx, key, cmp.Or(reason, "terminated by "+op.Subject+" in the console"))
	case "delete":
		err = c.cfg.Turns.Delete(ctx, key)
		to = Path + "instances"
	default:
		return "", errNotFound
	}
	if err != nil {
		return "", lifecycleError(action, err)
	}
	c.cfg.Log.InfoContext(ctx, "console action", "action", action, "operator", op.Subject, "instance", key.String())
	return to + "?done=" + url.QueryEscape(action+"d"), nil
}

func lifecycleError(action string, err error) error {
	switch {
	case errors.Is(err, engine.ErrTerminated):
		return &safeError{"The instance is terminated: it takes no more turns and cannot be " + action + "d. Nothing was changed."}
	case errors.Is(err, domain.ErrConflict):
		return &safeError{"The instance changed while this was sent. Nothing was changed; reload the page and try again."}
	}
	return err
}

// msText is a latency for a person: whole milliseconds, seconds from ten
// seconds on.
func msText(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10) + " ms"
}
