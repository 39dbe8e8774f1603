package turnsapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/testkit/ssetest"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/turn"
)

// frame is one block of an event stream: an event or a comment.
type frame = ssetest.Frame

// parseStream splits an event stream into its frames.
func parseStream(t *testing.T, r io.Reader) []frame {
	t.Helper()
	frames, err := ssetest.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// eventsOf is the frames' events, each checked against its id and type.
func eventsOf(t *testing.T, frames []frame) []turn.TurnEvent {
	t.Helper()
	var out []turn.TurnEvent
	for _, f := range frames {
		if f.Comment != "" {
			continue
		}
		var e turn.TurnEvent
		if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
			t.Fatalf("event %s: %v", f.ID, err)
		}
		if f.ID != fmt.Sprint(e.Seq) || f.Event != e.Type {
			t.Fatalf("frame id %s, event %s for %+v", f.ID, f.Event, e)
		}
		out = append(out, e)
	}
	return out
}

func commentsOf(frames []frame) []string {
	var out []string
	for _, f := range frames {
		if f.Comment != "" && f.Comment != httpx.CommentKeepAlive {
			out = append(out, f.Comment)
		}
	}
	return out
}

// streamReq is a stream request with the runtime token.
func streamReq(ctx context.Context, url, lastEventID string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, "GET", url, nil)
	if strings.HasPrefix(url, "http") {
		req, _ = http.NewRequestWithContext(ctx, "GET", url, nil)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return req
}

func TestEventStreamReplaysAnEndedTurn(t *testing.T) {
	h := newHarness(t, turntest.Call("echo", `{"q":"`+argCanary+`"}`), turntest.Say("done: 42"))
	want(t, h.do(t, "POST", postEvents, `{"text":"look up `+textCanary+`",`+alice+`}`, nil), 202, "", "")
	h.Deliver(t)
	var in inspection
	want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
	path := instance + "/turns/" + in.RecentTurns[0].ID + "/events"
	var all eventList
	want(t, h.do(t, "GET", path, "", &all), 200, "", "")
	n := len(all.Data)
	if n != 8 {
		t.Fatalf("%d events stored", n)
	}

	for _, tc := range []struct {
		name, query, lastEventID string
		from                     int // the first event's seq
	}{
		{"from the start", "", "", 0},
		{"after the query", "?after=2", "", 3},
		{"reconnect after the first", "", "0", 1},
		{"reconnect in the middle", "", "3", 4},
		{"Last-Event-ID before the query", "?after=1", "5", 6},
		{"reconnect after the last", "", "7", n},
		{"reconnect past the end", "", "100", n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, streamReq(t.Context(), path+tc.query, tc.lastEventID))
			h.seen.WriteString(rec.Body.String())
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("X-Accel-Buffering") != "no" {
				t.Fatalf("%d %v", rec.Code, rec.Header())
			}
			frames := parseStream(t, rec.Body)
			got := eventsOf(t, frames)
			if len(got) != n-tc.from || len(commentsOf(frames)) != 0 {
				t.Fatalf("%d events from seq %d, want %d: %+v", len(got), tc.from, n-tc.from, frames)
			}
			// Byte for byte the JSON route's events: the stream adds
			// nothing and leaves nothing out.
			for i, e := range got {
				wantJSON, _ := httpx.EncodeJSON(all.Data[tc.from+i])
				gotJSON, _ := httpx.EncodeJSON(e)
				if !bytes.Equal(gotJSON, wantJSON) || frames[i].Data != string(wantJSON) {
					t.Fatalf("event %d: %s, want %s", i, frames[i].Data, wantJSON)
				}
			}
		})
	}

	for _, tc := range []struct {
		name, path, lastEventID string
		status                  int
		code, mentions          string
	}{
		{"Last-Event-ID not a number", path, "x", 400, httpx.CodeInvalidRequest, "Last-Event-ID"},
		{"Last-Event-ID negative", path, "-1", 400, httpx.CodeInvalidRequest, "Last-Event-ID"},
		{"Last-Event-ID a fraction", path, "1.5", 400, httpx.CodeInvalidRequest, "Last-Event-ID"},
		{"after not a number", path + "?after=x", "", 400, httpx.CodeInvalidRequest, "after"},
		{"unknown turn", instance + "/turns/turn-0000/events", "", 404, httpx.CodeNotFound, `"turn-0000"`},
		{"unknown instance", "/v1/instances/support/other/assistant/turns/x/events", "", 404, httpx.CodeNotFound, "support/other/assistant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, streamReq(t.Context(), tc.path, tc.lastEventID))
			if rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("Content-Type %q: an error is the JSON error body", rec.Header().Get("Content-Type"))
			}
			want(t, rec, tc.status, tc.code, tc.mentions)
		})
	}
	// The JSON form ignores Last-Event-ID (a stream's header).
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Last-Event-ID", "x")
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	want(t, rec, 200, "", "")

	// The canaries are in tool arguments and the user's text, which no
	// turn event holds.
	for _, canary := range []string{argCanary, textCanary, subjectCanary} {
		if strings.Contains(h.seen.String(), canary) {
			t.Fatalf("a stream holds %s", canary)
		}
	}
}

// TestEventStreamFollowsARunningTurn: a turn parked on consent is followed
// live over a real connection; when it is terminated from elsewhere the
// stream sends its end and closes, and a client reconnecting with
// Last-Event-ID gets exactly what it had not seen.
func TestEventStreamFollowsARunningTurn(t *testing.T) {
	p := turntest.New(t, turntest.Call("whoami", `{}`))
	api, err := turnsapi.New(turnsapi.Config{Turns: p.Turns, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)}, StreamPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{Plane: p, h: api.Handler()}
	srv := httptest.NewServer(h.h)
	defer srv.Close()
	want(t, h.do(t, "POST", postEvents, `{"text":"who am i",`+alice+`}`, nil), 202, "", "")
	h.Deliver(t)
	var in inspection
	want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
	if in.ActiveTurn == nil || in.ActiveTurn.Status != "parked" {
		t.Fatalf("not parked: %+v", in)
	}
	path := srv.URL + instance + "/turns/" + in.ActiveTurn.ID + "/events"

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := srv.Client().Do(streamReq(ctx, path, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Read up to turn.parked: the turn is still on, the stream open.
	br := bufio.NewReader(resp.Body)
	var head strings.Builder
	for range 1000 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before turn.parked: %v (%q)", err, head.String())
		}
		head.WriteString(line)
		if line == "\n" && strings.Contains(head.String(), "event: turn.parked\n") {
			break
		}
	}
	seen := eventsOf(t, parseStream(t, strings.NewReader(head.String())))
	last := seen[len(seen)-1]
	if last.Type != turn.EvTurnParked {
		t.Fatalf("stream so far: %+v", seen)
	}

	// Ended elsewhere: the stream sends the rest and closes.
	want(t, h.do(t, "POST", instance+"/terminate", `{"reason":"the user left"}`, nil), 200, "", "")
	rest := parseStream(t, br)
	tail := eventsOf(t, rest)
	if len(tail) == 0 || tail[len(tail)-1].Type != turn.EvTurnInterrupted || len(commentsOf(rest)) != 0 {
		t.Fatalf("after the terminate: %+v", rest)
	}
	var all eventList
	want(t, h.do(t, "GET", instance+"/turns/"+in.ActiveTurn.ID+"/events", "", &all), 200, "", "")
	if got := append(seen, tail...); types(got) != types(all.Data) || len(got) != len(all.Data) {
		t.Fatalf("streamed %s, stored %s", types(got), types(all.Data))
	}

	// A reconnect after turn.parked gets the rest, once, and closes.
	resp2, err := srv.Client().Do(streamReq(ctx, path, fmt.Sprint(last.Seq)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if again := eventsOf(t, parseStream(t, resp2.Body)); types(again) != types(tail) || again[0].Seq != last.Seq+1 {
		t.Fatalf("reconnect after %d: %+v, want %s", last.Seq, again, types(tail))
	}
}

// fakeTurns answers Inspect and TurnEvents from a script of states by
// call number (the last one repeats); the other operations are not used
// by the stream.
type fakeTurns struct {
	mu     sync.Mutex
	calls  int
	script func(n int) (turn.State, error)
}

func (f *fakeTurns) Inspect(context.Context, turn.InstanceKey) (turn.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.calls
	f.calls++
	return f.script(n)
}

// TurnEvents reads the turn from the next scripted state.
func (f *fakeTurns) TurnEvents(ctx context.Context, key turn.InstanceKey, id string, after int64) (turn.Turn, []turn.TurnEvent, error) {
	st, err := f.Inspect(ctx, key)
	if err != nil {
		return turn.Turn{}, nil, err
	}
	return st.EventsAfter(id, after)
}

var errNotHere = errors.New("not used by the stream")

func (f *fakeTurns) Post(context.Context, string, string, turn.Incoming) (domain.Event, error) {
	return domain.Event{}, errNotHere
}
func (f *fakeTurns) List(context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	return nil, nil, errNotHere
}
func (f *fakeTurns) Pause(context.Context, turn.InstanceKey) error             { return errNotHere }
func (f *fakeTurns) Resume(context.Context, turn.InstanceKey) error            { return errNotHere }
func (f *fakeTurns) Terminate(context.Context, turn.InstanceKey, string) error { return errNotHere }
func (f *fakeTurns) Delete(context.Context, turn.InstanceKey) error            { return errNotHere }

// stateWith is a state holding turn "t1" with status and events of seq
// 0..events-1.
func stateWith(status turn.TurnStatus, events int) turn.State {
	st := turn.NewState()
	st.Turns["t1"] = turn.Turn{ID: "t1", Status: status}
	for i := range events {
		st.TurnEvents["t1"] = append(st.TurnEvents["t1"], turn.TurnEvent{TurnID: "t1", Seq: int64(i), Type: fmt.Sprintf("ev.%d", i), At: time.Unix(1795255200, 0).UTC()})
	}
	return st
}

func TestEventStreamEnds(t *testing.T) {
	storeDown := errors.New("dial tcp 10.0.0.7:8000: secret-store-detail")
	for _, tc := range []struct {
		name   string
		limits httpx.StreamLimits
		script func(n int) (turn.State, error)
		// ids are the events sent; comment the last comment (a keep-alive
		// aside); keepAlive whether one was sent.
		ids, comment string
		keepAlive    bool
		logged       string
	}{
		{name: "the turn ends after a few polls", script: func(n int) (turn.State, error) {
			switch {
			case n < 3:
				return stateWith(turn.TurnRunning, 1), nil
			case n < 6:
				return stateWith(turn.TurnParked, 3), nil
			}
			return stateWith(turn.TurnCompleted, 5), nil
		}, ids: "0,1,2,3,4"},
		{name: "keep-alive while the turn is quiet", limits: httpx.StreamLimits{KeepAlive: 5 * time.Millisecond}, script: func(n int) (turn.State, error) {
			if n < 15 {
				return stateWith(turn.TurnRunning, 1), nil
			}
			return stateWith(turn.TurnFailed, 2), nil
		}, ids: "0,1", keepAlive: true},
		{name: "maximum duration", limits: httpx.StreamLimits{MaxDuration: 60 * time.Millisecond}, script: func(n int) (turn.State, error) {
			return stateWith(turn.TurnRunning, min(n+1, 3)), nil
		}, ids: "0,1,2", comment: httpx.CommentMaxStream},
		{name: "the instance is deleted", script: func(n int) (turn.State, error) {
			if n < 2 {
				return stateWith(turn.TurnRunning, 2), nil
			}
			return turn.State{}, fmt.Errorf("turn store: %w", domain.ErrNotFound)
		}, ids: "0,1", comment: "the instance was deleted; the stream ends"},
		{name: "the turn is forgotten", script: func(n int) (turn.State, error) {
			if n < 2 {
				return stateWith(turn.TurnRunning, 2), nil
			}
			return turn.NewState(), nil
		}, ids: "0,1", comment: "the turn is no longer stored; the stream ends"},
		{name: "the store fails", script: func(n int) (turn.State, error) {
			if n < 2 {
				return stateWith(turn.TurnRunning, 1), nil
			}
			return turn.State{}, storeDown
		}, ids: "0", comment: "the stream failed; reconnect with Last-Event-ID to go on (request req-77)", logged: "secret-store-detail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			f := &fakeTurns{script: tc.script}
			api, err := turnsapi.New(turnsapi.Config{Turns: f, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)},
				Log: slog.New(slog.NewJSONHandler(&logs, nil)), StreamPoll: time.Millisecond, Stream: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req := streamReq(ctx, instance+"/turns/t1/events", "")
			req.Header.Set("X-Request-Id", "req-77")
			rec := httptest.NewRecorder()
			api.Handler().ServeHTTP(rec, req)
			if ctx.Err() != nil {
				t.Fatal("the stream did not end by itself")
			}
			body := rec.Body.String()
			frames := parseStream(t, strings.NewReader(body))
			var ids []string
			for _, e := range eventsOf(t, frames) {
				ids = append(ids, fmt.Sprint(e.Seq))
			}
			comments := commentsOf(frames)
			last := ""
			if len(comments) > 0 {
				last = comments[len(comments)-1]
			}
			keepAlive := strings.Contains(body, ": "+httpx.CommentKeepAlive+"\n")
			if strings.Join(ids, ",") != tc.ids || last != tc.comment || tc.keepAlive && !keepAlive {
				t.Fatalf("ids %v, comments %q, keep-alive %v\n%s", ids, comments, keepAlive, body)
			}
			if strings.Contains(body, "secret-store-detail") {
				t.Fatal("the store's error is in the stream")
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
				t.Fatalf("the failure is not logged: %s", logs.String())
			}
		})
	}
}

// TestEventStreamReconnectsLoseNothing: a stream cut by its maximum
// duration, then resumed with the last id it sent, again and again, gets
// every event once, in order.
func TestEventStreamReconnectsLoseNothing(t *testing.T) {
	const total = 12
	start := time.Now()
	// The turn emits an event every 5 ms and ends with the last.
	f := &fakeTurns{script: func(int) (turn.State, error) {
		n := min(int(time.Since(start)/(5*time.Millisecond))+1, total)
		status := turn.TurnRunning
		if n == total {
			status = turn.TurnCompleted
		}
		return stateWith(status, n), nil
	}}
	api, err := turnsapi.New(turnsapi.Config{Turns: f, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)},
		StreamPoll: time.Millisecond, Stream: httpx.StreamLimits{MaxDuration: 15 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	lastID := ""
	for range 100 {
		rec := httptest.NewRecorder()
		api.Handler().ServeHTTP(rec, streamReq(t.Context(), instance+"/turns/t1/events", lastID))
		frames := parseStream(t, rec.Body)
		for _, e := range eventsOf(t, frames) {
			lastID = fmt.Sprint(e.Seq)
			got = append(got, lastID)
		}
		if c := commentsOf(frames); len(c) == 0 {
			break // ended with the turn
		}
	}
	want := make([]string, total)
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v over reconnects, want %v", got, want)
	}
}

// noFlush is a response writer that cannot flush (API Gateway's adapter).
type noFlush struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (w *noFlush) Header() http.Header         { return w.h }
func (w *noFlush) WriteHeader(code int)        { w.code = code }
func (w *noFlush) Write(b []byte) (int, error) { return w.body.Write(b) }

// TestEventStreamWhereNothingStreams: behind a buffering edge, a request
// for a stream gets a 406 that says where streams are served.
func TestEventStreamWhereNothingStreams(t *testing.T) {
	h := newHarness(t, turntest.Say("done"))
	want(t, h.do(t, "POST", postEvents, `{"text":"hi",`+alice+`}`, nil), 202, "", "")
	h.Deliver(t)
	var in inspection
	want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
	req := streamReq(t.Context(), instance+"/turns/"+in.RecentTurns[0].ID+"/events", "")
	w := &noFlush{h: http.Header{}}
	h.h.ServeHTTP(w, req)
	if w.code != http.StatusNotAcceptable || !strings.Contains(w.body.String(), `"code":"notAcceptable"`) || !strings.Contains(w.body.String(), "TurnStreamUrl") {
		t.Fatalf("%d %s", w.code, w.body.String())
	}
}

// TestEventStreamsCappedPerInstance: the turn routes' callers are one
// trusted runtime, so their streams are capped per instance watched
// (issue 17, item 11): over the cap a stream is refused 429 with
// Retry-After, and a closed stream frees its place.
func TestEventStreamsCappedPerInstance(t *testing.T) {
	p := turntest.New(t, turntest.Call("whoami", `{}`))
	gate := httpx.NewStreamGate(1, 10)
	api, err := turnsapi.New(turnsapi.Config{Turns: p.Turns, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)}, StreamPoll: 10 * time.Millisecond,
		Stream: httpx.StreamLimits{Gate: gate}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{Plane: p, h: api.Handler()}
	srv := httptest.NewServer(h.h)
	defer srv.Close()
	want(t, h.do(t, "POST", postEvents, `{"text":"who am i",`+alice+`}`, nil), 202, "", "")
	h.Deliver(t)
	var in inspection
	want(t, h.do(t, "GET", instance, "", &in), 200, "", "")
	if in.ActiveTurn == nil {
		t.Fatalf("no active turn: %+v", in)
	}
	path := srv.URL + instance + "/turns/" + in.ActiveTurn.ID + "/events"
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	first, err := srv.Client().Do(streamReq(ctx, path, ""))
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("first stream: %v %v", first, err)
	}
	second, err := srv.Client().Do(streamReq(ctx, path, ""))
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != 429 || second.Header.Get("Retry-After") == "" {
		t.Fatalf("a second stream of the instance: %d", second.StatusCode)
	}
	first.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if total, _ := gate.Open(""); total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream kept its place")
		}
	}
	again, err := srv.Client().Do(streamReq(ctx, path, ""))
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != 200 {
		t.Fatalf("after the first closed: %d", again.StatusCode)
	}
}
