package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/turn"
)

// storedEvents are a turn's events as the JSON route answers them, one
// compact JSON object a line: what `instances events` must print.
func storedEvents(t *testing.T, url, home, turnID string) []string {
	t.Helper()
	c, err := newClient(homeConfig(t, home), url)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Data []json.RawMessage }
	if err := c.call(context.Background(), "GET", instancePath("support", "k1", "assistant")+"/turns/"+turnID+"/events", nil, &out); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range out.Data {
		var b bytes.Buffer
		_ = json.Compact(&b, e)
		lines = append(lines, b.String())
	}
	return lines
}

// TestInstancesEvents (issue 18.5): `instances events` prints a turn's
// events, one JSON object a line as the API holds them — the latest
// turn's, named on stderr, unless --turn names another.
func TestInstancesEvents(t *testing.T) {
	p, url, home := turnServer(t, turntest.Say("hello alice"), turntest.Say("hello again"))
	target := []string{"--swarm", "support", "--instance", "k1", "--agent", "assistant", "--url", url, "--home", home}
	if _, _, err := runCmd(t, append([]string{"instances", "events"}, target...)...); err == nil || !strings.Contains(err.Error(), "404 notFound") {
		t.Fatalf("no instance yet: %v", err)
	}
	var turns []string
	for _, text := range []string{"hi", "again"} {
		if _, _, err := runCmd(t, "send", "--swarm", "support", "--instance", "k1", "--url", url, "--home", home, text); err != nil {
			t.Fatal(err)
		}
		p.Deliver(t)
		st, err := p.Turns.Inspect(context.Background(), turn.InstanceKey{Swarm: "support", Key: "k1", Agent: "assistant"})
		if err != nil {
			t.Fatal(err)
		}
		for id := range st.Turns {
			if !strings.Contains(strings.Join(turns, ","), id) {
				turns = append(turns, id)
			}
		}
	}
	if len(turns) != 2 {
		t.Fatalf("turns %v", turns)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		turn  string
		named bool // stderr names the turn
	}{
		{"the latest", nil, turns[1], true},
		{"--turn", []string{"--turn", turns[0]}, turns[0], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := runCmd(t, append(append([]string{"instances", "events"}, target...), tc.flags...)...)
			want := storedEvents(t, url, home, tc.turn)
			if err != nil || out != strings.Join(want, "\n")+"\n" || len(want) < 3 {
				t.Fatalf("%v; printed\n%s\nwant\n%s", err, out, strings.Join(want, "\n"))
			}
			if named := errOut == "turn "+tc.turn+" (completed)\n"; named != tc.named {
				t.Fatalf("stderr %q", errOut)
			}
		})
	}
	if _, _, err := runCmd(t, append(append([]string{"instances", "events"}, target...), "--turn", "turn-0000")...); err == nil || !strings.Contains(err.Error(), `404 notFound: no turn "turn-0000"`) {
		t.Fatalf("unknown turn: %v", err)
	}
}

// syncBuffer is a bytes.Buffer for a command running in another
// goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// streamServer serves the turn routes as serve does, streams cut after
// maxStream (so a follower must reconnect), and records each stream
// request's Last-Event-ID; the stream requests whose number is in fail
// get a 503 instead; replay: it drops Last-Event-ID, so each stream
// starts again from the turn's first event.
type streamServer struct {
	*turntest.Plane
	url, home string
	mu        sync.Mutex
	lastIDs   []string
	fail      map[int]bool
	replay    bool
}

func newStreamServer(t *testing.T, maxStream time.Duration, fail map[int]bool, replay bool, script ...turntest.Answer) *streamServer {
	t.Helper()
	const tok = "cli-follow-runtime-token"
	s := &streamServer{Plane: turntest.New(t, script...), home: t.TempDir(), fail: fail, replay: replay}
	api, err := turnsapi.New(turnsapi.Config{Turns: s.Turns, Caller: httpapi.BearerToken{Token: domain.NewSecret(tok)},
		StreamPoll: 5 * time.Millisecond, Stream: httpx.StreamLimits{MaxDuration: maxStream}})
	if err != nil {
		t.Fatal(err)
	}
	h := api.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			s.mu.Lock()
			s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
			refuse := s.fail[len(s.lastIDs)]
			s.mu.Unlock()
			if refuse {
				httpx.WriteError(w, r, http.StatusServiceUnavailable, "unavailable", "restarting")
				return
			}
			if s.replay {
				r.Header.Del("Last-Event-ID")
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	if err := os.WriteFile(filepath.Join(s.home, "runtime-token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.RuntimeToken, "")
	return s
}

func (s *streamServer) streamRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lastIDs...)
}

// until polls cond until it holds or 10 s have passed.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInstancesEventsFollow (issue 18.5): --follow follows a turn parked
// on consent over the route's event stream until it ends, through
// streams the server cuts and a refused reconnect, resuming each with
// Last-Event-ID: it prints every stored event once, in order — also
// when a server sends again what it had sent — and returns when the
// turn's end is printed.
func TestInstancesEventsFollow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		replay bool
	}{{"the server resumes", false}, {"the server replays", true}} {
		t.Run(tc.name, func(t *testing.T) { testFollow(t, tc.replay) })
	}
}

func testFollow(t *testing.T, replay bool) {
	s := newStreamServer(t, 60*time.Millisecond, map[int]bool{3: true}, replay, turntest.Call("whoami", `{}`), turntest.Say("You are alice."))
	ctx := context.Background()
	if _, err := s.Turns.Post(ctx, "support", "k1", turn.Incoming{Text: "who am I?", Auth: domain.TurnAuth{}}); err != nil {
		t.Fatal(err)
	}
	s.Deliver(t)
	key := turn.InstanceKey{Swarm: "support", Key: "k1", Agent: "assistant"}
	st, err := s.Turns.Inspect(ctx, key)
	if err != nil || st.Turns[st.Instance.ActiveTurn].Status != turn.TurnParked {
		t.Fatalf("not parked: %+v %v", st.Instance, err)
	}
	turnID := st.Instance.ActiveTurn

	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"instances", "events", "--swarm", "support", "--instance", "k1", "--agent", "assistant", "--follow",
			"--url", s.url, "--home", s.home}, strings.NewReader(""), &out, &errOut)
	}()
	// Parked, and followed across the server's cuts (the third stream
	// request was refused).
	until(t, "turn.parked and reconnects", func() bool {
		return strings.Contains(out.String(), `"type":"turn.parked"`) && len(s.streamRequests()) >= 4
	})
	select {
	case err := <-done:
		t.Fatalf("follow returned while the turn is parked: %v", err)
	default:
	}

	// The consent: the call resumes and the turn completes.
	s.Tools.Grant()
	if err := s.Queue.Enqueue(ctx, domain.Event{ID: "as-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "support"}, InstanceKey: "k1",
		AgentName: "assistant", Input: `{"type":"auth.granted"}`}); err != nil {
		t.Fatal(err)
	}
	s.Deliver(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow: %v (stderr %q)", err, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("follow did not return after the turn ended")
	}

	want := storedEvents(t, s.url, s.home, turnID)
	if got := strings.TrimSuffix(out.String(), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("printed\n%s\nwant (each once, in order)\n%s", got, strings.Join(want, "\n"))
	}
	var last struct{ Type string }
	_ = json.Unmarshal([]byte(want[len(want)-1]), &last)
	if last.Type != turn.EvTurnCompleted {
		t.Fatalf("the last event: %s", want[len(want)-1])
	}
	// Each reconnect asked for what came after the last event printed.
	reqs := s.streamRequests()
	if reqs[0] != "" {
		t.Fatalf("the first stream request had Last-Event-ID %q", reqs[0])
	}
	for _, id := range reqs[1:] {
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 || n >= len(want) {
			t.Fatalf("a reconnect's Last-Event-ID %q (of %d events); all: %q", id, len(want), reqs)
		}
	}
	if !strings.Contains(errOut.String(), "turn "+turnID+" (parked)") || !strings.Contains(errOut.String(), "503 unavailable") {
		t.Fatalf("stderr: %q", errOut.String())
	}
}

// TestInstancesEventsFollowEnds: following a turn that has ended prints
// its events and returns at once; following a turn that is not there is
// an error, not a retry.
func TestInstancesEventsFollowEnds(t *testing.T) {
	s := newStreamServer(t, 0, nil, false, turntest.Say("hello"))
	ctx := context.Background()
	if _, err := s.Turns.Post(ctx, "support", "k1", turn.Incoming{Text: "hi", Auth: domain.TurnAuth{}}); err != nil {
		t.Fatal(err)
	}
	s.Deliver(t)
	st, _ := s.Turns.Inspect(ctx, turn.InstanceKey{Swarm: "support", Key: "k1", Agent: "assistant"})
	var turnID string
	for id := range st.Turns {
		turnID = id
	}
	args := []string{"instances", "events", "--swarm", "support", "--instance", "k1", "--agent", "assistant", "--follow", "--url", s.url, "--home", s.home}
	out, _, err := runCmd(t, append(args, "--turn", turnID)...)
	if want := storedEvents(t, s.url, s.home, turnID); err != nil || out != strings.Join(want, "\n")+"\n" || len(s.streamRequests()) != 1 {
		t.Fatalf("%v, %d stream requests; printed\n%s\nwant\n%s", err, len(s.streamRequests()), out, strings.Join(want, "\n"))
	}
	if _, _, err := runCmd(t, append(args, "--turn", "turn-0000")...); err == nil || !strings.Contains(err.Error(), "404 notFound") || len(s.streamRequests()) != 2 {
		t.Fatalf("an unknown turn: %v after %d requests", err, len(s.streamRequests()))
	}
}
