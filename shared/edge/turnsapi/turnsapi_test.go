package turnsapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/turn"
)

const token = "runtime-token-for-tests"

// Canaries: in a tool's arguments (and so its result), in the user's
// message, in the turn's auth context. None may be in any answer.
const (
	argCanary     = "arg-canary-1f2e3d4c5b6a"
	textCanary    = "text-canary-a6b5c4d3e2f1"
	subjectCanary = "subject-canary-0a9b8c7d"
)

type harness struct {
	*turntest.Plane
	h http.Handler
	// seen gathers every answer body, for the leak scan.
	seen strings.Builder
}

func newHarness(t *testing.T, script ...turntest.Answer) *harness {
	t.Helper()
	p := turntest.New(t, script...)
	api, err := turnsapi.New(turnsapi.Config{Turns: p.Turns, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)}})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{Plane: p, h: api.Handler()}
}

// do sends a request with the runtime token and decodes the answer into out
// (when not nil).
func (h *harness) do(t *testing.T, method, path, body string, out any) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, path, nil)
	} else {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	h.seen.WriteString(rec.Body.String())
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, rec.Code, rec.Body, err)
		}
	}
	return rec
}

// want checks an answer's status and, for an error, its code and that its
// message mentions a word (the field at fault).
func want(t *testing.T, rec *httptest.ResponseRecorder, status int, code, mentions string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	if code == "" {
		return
	}
	var b httpx.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if b.Error.Code != code || !strings.Contains(b.Error.Message, mentions) || b.Error.RequestID == "" {
		t.Fatalf("error %+v, want code %s and a message mentioning %q", b.Error, code, mentions)
	}
}

const (
	alice      = `"auth":{"actor":{"type":"user","id":"alice"},"subjects":{"user":"` + subjectCanary + `"}}`
	instance   = "/v1/instances/support/1712345678.000100/assistant"
	postEvents = "/v1/instances/support/1712345678.000100/events"
)

func TestEveryRouteNeedsTheRuntimeCredential(t *testing.T) {
	h := newHarness(t)
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/instances"},
		{"POST", postEvents},
		{"GET", instance},
		{"DELETE", instance},
		{"POST", instance + "/pause"},
		{"POST", instance + "/resume"},
		{"POST", instance + "/terminate"},
		{"GET", instance + "/turns/turn-1/events"},
	} {
		for name, auth := range map[string]string{"none": "", "wrong token": "Bearer nope"} {
			t.Run(rt.method+" "+rt.path+" "+name, func(t *testing.T) {
				req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(`{"text":"x",`+alice+`}`))
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				rec := httptest.NewRecorder()
				h.h.ServeHTTP(rec, req)
				want(t, rec, 401, httpx.CodeUnauthenticated, "runtime")
			})
		}
	}
	if n := len(h.Queue.Pending()); n != 0 {
		t.Fatalf("%d events queued without a credential", n)
	}
}

func TestPostEvent(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, contentType string
		status                        int
		code, mentions                string
		// agent and eventID the event is queued with ("ev-…" when
		// generated).
		agent, eventID, key string
	}{
		{name: "user input to the entrypoint", body: `{"text":"hi",` + alice + `}`, status: 202, agent: "assistant", eventID: "ev-"},
		{name: "routed by the ingress rules", body: `{"text":"hi","properties":{"channel":"billing"},` + alice + `}`, status: 202, agent: "billing", eventID: "ev-"},
		{name: "to a named agent", body: `{"text":"hi","agent":"billing",` + alice + `}`, status: 202, agent: "billing", eventID: "ev-"},
		{name: "a caller's id is namespaced", body: `{"id":"slack-1712.1","text":"hi",` + alice + `}`, status: 202, agent: "assistant", eventID: "in:slack-1712.1"},
		{name: "another type without text", body: `{"type":"system.wakeup",` + alice + `}`, status: 202, agent: "assistant", eventID: "ev-"},
		{name: "no one to act for", body: `{"text":"hi","auth":{}}`, status: 202, agent: "assistant", eventID: "ev-"},
		{name: "an escaped key", path: "/v1/instances/support/chat%20C1%3A7/events", body: `{"text":"hi",` + alice + `}`, status: 202, agent: "assistant", eventID: "ev-", key: "chat C1:7"},
		{name: "unknown swarm", path: "/v1/instances/sales/k1/events", body: `{"text":"hi",` + alice + `}`, status: 404, code: httpx.CodeNotFound, mentions: `"sales"`},
		{name: "agent not in the swarm", body: `{"text":"hi","agent":"planner",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: "agent"},
		{name: "key holding a slash", path: "/v1/instances/support/a%2Fb/events", body: `{"text":"hi",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: "instanceKey"},
		{name: "key too long", path: "/v1/instances/support/" + strings.Repeat("k", 201) + "/events", body: `{"text":"hi",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: "instanceKey"},
		{name: "key with a control character", path: "/v1/instances/support/a%01b/events", body: `{"text":"hi",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: "instanceKey"},
		{name: "no auth", body: `{"text":"hi"}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `"auth"`},
		{name: "user input without text", body: `{` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `"text"`},
		{name: "an internal type", body: `{"type":"auth.granted","text":"x",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `"type" auth.granted`},
		{name: "a type with spaces", body: `{"type":"user input","text":"x",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `"type"`},
		{name: "an id with spaces", body: `{"id":"a b","text":"x",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `"id"`},
		{name: "an unknown field", body: `{"txt":"hi",` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `unknown field "txt"`},
		{name: "an unknown auth field", body: `{"text":"hi","auth":{"actr":{}}}`, status: 400, code: httpx.CodeInvalidRequest, mentions: `unknown field "actr"`},
		{name: "a property that is not a string", body: `{"text":"hi","properties":{"n":1},` + alice + `}`, status: 400, code: httpx.CodeInvalidRequest, mentions: "properties"},
		{name: "not JSON", body: `text=hi`, contentType: "application/x-www-form-urlencoded", status: 415, code: httpx.CodeUnsupportedMediaType, mentions: "application/json"},
		{name: "too large", body: `{"text":"` + strings.Repeat("a", httpx.DefaultMaxBody) + `",` + alice + `}`, status: 413, code: httpx.CodePayloadTooLarge, mentions: "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			path := tc.path
			if path == "" {
				path = postEvents
			}
			req := httptest.NewRequest("POST", path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+token)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			want(t, rec, tc.status, tc.code, tc.mentions)
			queued := h.Queue.Pending()
			if tc.status != 202 {
				if len(queued) != 0 {
					t.Fatalf("refused, yet queued %+v", queued)
				}
				return
			}
			var got struct{ EventID, Swarm, InstanceKey, Agent string }
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			key := tc.key
			if key == "" {
				key = "1712345678.000100"
			}
			if !strings.HasPrefix(got.EventID, tc.eventID) || got.Swarm != "support" || got.InstanceKey != key || got.Agent != tc.agent {
				t.Fatalf("answer %+v", got)
			}
			if len(queued) != 1 {
				t.Fatalf("queued %d events", len(queued))
			}
			ev := queued[0]
			if ev.ID != got.EventID || ev.SwarmRef.Name != "support" || ev.InstanceKey != key || ev.AgentName != tc.agent || ev.EnqueuedAt.IsZero() {
				t.Fatalf("queued %+v", ev)
			}
		})
	}
}

func TestPostedEventCarriesItsContext(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, "POST", postEvents, `{"text":"hi","origin":{"connector":"slack","channel":"C1"},`+alice+`}`, nil)
	want(t, rec, 202, "", "")
	ev := h.Queue.Pending()[0]
	var in struct{ Type, Text string }
	_ = json.Unmarshal([]byte(ev.Input), &in)
	if in.Type != "user.input" || in.Text != "hi" || ev.Origin["channel"] != "C1" ||
		ev.Auth.Actor == nil || ev.Auth.Actor.ID != "alice" || ev.Auth.Subjects == nil || ev.Auth.Subjects.User != subjectCanary {
		t.Fatalf("queued %+v (input %+v)", ev, in)
	}
}

// inspection is GET …/{agent}'s answer.
type inspection struct {
	Swarm, InstanceKey, Agent, Status string
	ActiveTurn                        *turnView
	Backlog                           int
	RecentTurns                       []turnView
}

type turnView struct {
	ID, Status, InputEventID, InputType, TraceID, FinalAnswer string
	Steps, ToolCalls, Errors                                  int
	Usage                                                     struct{ TotalTokens int64 }
	Error                                                     *turn.Failure
	EndedAt                                                   *string
}

type eventList struct {
	Data []turn.TurnEvent
}

func types(evs []turn.TurnEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return strings.Join(out, ",")
}

func TestRoundTrip(t *testing.T) {
	h := newHarness(t, turntest.Call("echo", `{"q":"`+argCanary+`"}`), turntest.Say("done: 42"))
	var posted struct{ EventID string }
	want(t, h.do(t, "POST", postEvents, `{"text":"look up `+textCanary+`",`+alice+`}`, &posted), 202, "", "")
	h.Deliver(t)

	var in inspection
	want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
	if in.Swarm != "support" || in.InstanceKey != "1712345678.000100" || in.Agent != "assistant" || in.Status != "active" || in.ActiveTurn != nil || in.Backlog != 0 || len(in.RecentTurns) != 1 {
		t.Fatalf("inspect %+v", in)
	}
	tr := in.RecentTurns[0]
	if tr.InputEventID == "" || tr.InputEventID != posted.EventID {
		t.Fatalf("the turn's inputEventId %q, want the posted event's id %q", tr.InputEventID, posted.EventID)
	}
	if tr.Status != "completed" || tr.FinalAnswer != "done: 42" || tr.Steps != 2 || tr.ToolCalls != 1 || tr.Usage.TotalTokens != 30 || tr.InputType != "user.input" || tr.EndedAt == nil || tr.TraceID == "" {
		t.Fatalf("turn %+v", tr)
	}

	var all eventList
	want(t, h.do(t, "GET", instance+"/turns/"+tr.ID+"/events", "", &all), 200, "", "")
	if got := types(all.Data); got != "turn.started,step.started,tool.called,tool.completed,step.completed,step.started,step.completed,turn.completed" {
		t.Fatalf("events %s", got)
	}
	for i, e := range all.Data {
		if e.Seq != int64(i) || e.TurnID != tr.ID {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if !strings.Contains(string(all.Data[0].Data), posted.EventID) {
		t.Fatalf("turn.started does not name the posted event %s: %s", posted.EventID, all.Data[0].Data)
	}
	for _, after := range []int64{0, 3, 6, 7, 100} {
		var page eventList
		want(t, h.do(t, "GET", fmt.Sprintf("%s/turns/%s/events?after=%d", instance, tr.ID, after), "", &page), 200, "", "")
		wantN := max(0, len(all.Data)-int(after)-1)
		if len(page.Data) != wantN || wantN > 0 && page.Data[0].Seq != after+1 {
			t.Fatalf("after=%d: %+v", after, page.Data)
		}
	}

	var list struct {
		Data []struct{ Swarm, InstanceKey, Agent, Status, ActiveTurn, UpdatedAt string }
	}
	want(t, h.do(t, "GET", "/v1/instances", "", &list), 200, "", "")
	if len(list.Data) != 1 || list.Data[0].InstanceKey != "1712345678.000100" || list.Data[0].Agent != "assistant" || list.Data[0].Status != "active" || list.Data[0].ActiveTurn != "" || list.Data[0].UpdatedAt == "" {
		t.Fatalf("list %+v", list)
	}

	for _, tc := range []struct {
		name, path     string
		status         int
		code, mentions string
	}{
		{"unknown turn", instance + "/turns/turn-0000/events", 404, httpx.CodeNotFound, `"turn-0000"`},
		{"unknown instance", "/v1/instances/support/other/assistant/turns/" + tr.ID + "/events", 404, httpx.CodeNotFound, "support/other/assistant"},
		{"after not a number", instance + "/turns/" + tr.ID + "/events?after=x", 400, httpx.CodeInvalidRequest, "after"},
		{"after negative", instance + "/turns/" + tr.ID + "/events?after=-1", 400, httpx.CodeInvalidRequest, "after"},
		{"instance key with a control character", "/v1/instances/support/a%7Fb/assistant", 400, httpx.CodeInvalidRequest, "instanceKey"},
		{"agent too long", "/v1/instances/support/k/" + strings.Repeat("a", 201), 400, httpx.CodeInvalidRequest, "agent"},
		{"no such route", instance + "/turns", 404, httpx.CodeNotFound, "no route"},
	} {
		t.Run(tc.name, func(t *testing.T) { want(t, h.do(t, "GET", tc.path, "", nil), tc.status, tc.code, tc.mentions) })
	}

	for _, canary := range []string{argCanary, textCanary, subjectCanary} {
		if strings.Contains(h.seen.String(), canary) {
			t.Fatalf("an answer holds %s: %s", canary, h.seen.String())
		}
	}
	// The canaries are in the store: the routes leave them out.
	st, _ := h.Turns.Inspect(t.Context(), turn.InstanceKey{Swarm: "support", Key: "1712345678.000100", Agent: "assistant"})
	if raw, _ := json.Marshal(st); !strings.Contains(string(raw), argCanary) || !strings.Contains(string(raw), textCanary) {
		t.Fatal("the canaries never reached the store: the scan proves nothing")
	}
}

func TestLifecycle(t *testing.T) {
	h := newHarness(t, turntest.Say("one"), turntest.Say("two"), turntest.Call("whoami", `{"who":"`+argCanary+`"}`))
	post := func(text string) {
		t.Helper()
		want(t, h.do(t, "POST", postEvents, `{"text":"`+text+`",`+alice+`}`, nil), 202, "", "")
	}
	inspect := func() inspection {
		t.Helper()
		var in inspection
		want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
		return in
	}
	op := func(name, body string, status int, code, mentions, wantStatus string) {
		t.Helper()
		var got struct{ Status string }
		rec := h.do(t, "POST", instance+"/"+name, body, &got)
		want(t, rec, status, code, mentions)
		if wantStatus != "" && got.Status != wantStatus {
			t.Fatalf("%s: status %q, want %q", name, got.Status, wantStatus)
		}
	}

	// Unknown instance: every operation is a 404.
	op("pause", "", 404, httpx.CodeNotFound, "support/1712345678.000100/assistant", "")
	op("resume", "", 404, httpx.CodeNotFound, "support/1712345678.000100/assistant", "")
	op("terminate", "", 404, httpx.CodeNotFound, "support/1712345678.000100/assistant", "")
	want(t, h.do(t, "DELETE", instance, "", nil), 404, httpx.CodeNotFound, "support/1712345678.000100/assistant")
	want(t, h.do(t, "GET", instance, "", nil), 404, httpx.CodeNotFound, "support/1712345678.000100/assistant")

	post("first")
	h.Deliver(t)

	// Paused: a message waits in the backlog, the model is not called.
	op("pause", "", 200, "", "", "paused")
	op("pause", "", 200, "", "", "paused") // again: no change
	post("second")
	h.Deliver(t)
	if in := inspect(); in.Status != "paused" || in.Backlog != 1 || h.Model.Calls() != 1 {
		t.Fatalf("paused: %+v, %d model calls", in, h.Model.Calls())
	}
	// Resumed: the wake-up runs the backlog.
	op("resume", "", 200, "", "", "active")
	h.Deliver(t)
	in := inspect()
	if in.Status != "active" || in.Backlog != 0 || len(in.RecentTurns) != 2 || in.RecentTurns[0].FinalAnswer != "two" || in.RecentTurns[1].FinalAnswer != "one" {
		t.Fatalf("resumed: %+v", in)
	}

	// A turn parked on consent, then terminated: it is interrupted, with
	// the reason.
	post("who am i")
	h.Deliver(t)
	if in := inspect(); in.ActiveTurn == nil || in.ActiveTurn.Status != "parked" {
		t.Fatalf("parked: %+v", in)
	}
	op("terminate", `{"reasn":"x"}`, 400, httpx.CodeInvalidRequest, `unknown field "reasn"`, "")
	op("terminate", `{"reason":"`+strings.Repeat("r", 1001)+`"}`, 400, httpx.CodeInvalidRequest, `"reason"`, "")
	op("terminate", `{"reason":"the user left"}`, 200, "", "", "terminated")
	in = inspect()
	if in.Status != "terminated" || in.ActiveTurn != nil || in.RecentTurns[0].Status != "interrupted" || in.RecentTurns[0].Error == nil || in.RecentTurns[0].Error.Message != "the user left" {
		t.Fatalf("terminated: %+v", in)
	}
	op("terminate", "", 200, "", "", "terminated") // again: no change
	op("pause", "", 409, turnsapi.CodeInstanceTerminated, "terminated", "")
	op("resume", "", 409, turnsapi.CodeInstanceTerminated, "terminated", "")

	var del map[string]bool
	want(t, h.do(t, "DELETE", instance, "", &del), 200, "", "")
	if !del["deleted"] || !del["oauthGrantsKept"] || len(del) != 2 {
		t.Fatalf("delete: %v", del)
	}
	want(t, h.do(t, "GET", instance, "", nil), 404, httpx.CodeNotFound, "support/1712345678.000100/assistant")
	want(t, h.do(t, "DELETE", instance, "", nil), 404, httpx.CodeNotFound, "support/1712345678.000100/assistant")
	var list struct{ Data []any }
	want(t, h.do(t, "GET", "/v1/instances", "", &list), 200, "", "")
	if list.Data == nil || len(list.Data) != 0 {
		t.Fatalf("list after delete: %+v", list)
	}
	if strings.Contains(h.seen.String(), argCanary) || strings.Contains(h.seen.String(), subjectCanary) {
		t.Fatalf("an answer holds a canary: %s", h.seen.String())
	}
}

func TestNew(t *testing.T) {
	p := turntest.New(t)
	for name, cfg := range map[string]turnsapi.Config{
		"no turns":  {Caller: httpapi.GatewayAuthorized{}},
		"no caller": {Turns: p.Turns},
	} {
		if _, err := turnsapi.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCallerIDsAreScopedToTheInstance: a caller's id deduplicates retried
// posts to one instance only; two conversations may use the same ids (the
// queues deduplicate across all instances).
func TestCallerIDsAreScopedToTheInstance(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{postEvents, postEvents, "/v1/instances/support/other-thread/events"} {
		want(t, h.do(t, "POST", path, `{"id":"msg-1","text":"hi",`+alice+`}`, nil), 202, "", "")
	}
	q := h.Queue.Pending()
	if len(q) != 3 {
		t.Fatalf("queued %d", len(q))
	}
	if q[0].ID != q[1].ID || !strings.HasPrefix(q[0].ID, "in:msg-1@") || len(q[0].ID) != len("in:msg-1@")+12 {
		t.Fatalf("a retried post to one instance: %q and %q, want one id in:msg-1@<instance>", q[0].ID, q[1].ID)
	}
	if q[2].ID == q[0].ID || !strings.HasPrefix(q[2].ID, "in:msg-1@") {
		t.Fatalf("the same id to another instance: %q, want a different scoped id than %q", q[2].ID, q[0].ID)
	}
}
