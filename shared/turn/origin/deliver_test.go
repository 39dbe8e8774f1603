package origin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/turn"
)

const testSecret = "test-hmac-key-0123456789abcdef0123456789"

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	path   string
}

// receiver is an httptest webhook receiver answering from a script of
// statuses (the last repeats; hangUp closes the connection unanswered).
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      []delivery
	statuses []int
	// hold, when set, is waited on before answering.
	hold chan struct{}
	// arrived receives each request's delivery id as it comes in.
	arrived chan string
}

const hangUp = -1

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	rv := &receiver{statuses: statuses, arrived: make(chan string, 100)}
	rv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		rv.got = append(rv.got, delivery{header: r.Header.Clone(), body: body, path: r.URL.RequestURI()})
		n := len(rv.got)
		hold := rv.hold
		rv.mu.Unlock()
		rv.arrived <- r.Header.Get(HeaderDelivery)
		if hold != nil {
			<-hold
		}
		status := http.StatusNoContent
		if len(rv.statuses) > 0 {
			status = rv.statuses[min(n, len(rv.statuses))-1]
		}
		if status == hangUp {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rv.srv.Close)
	return rv
}

func (rv *receiver) deliveries() []delivery {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.got)
}

// logBuffer collects JSON log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// count is how many lines hold s.
func (l *logBuffer) count(s string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func connector(name, url string, events ...string) *bundle.Connector {
	if len(events) == 0 {
		events = bundle.DefaultConnectorEvents()
	}
	return &bundle.Connector{Name: name, Type: bundle.ConnectorTypeWebhook, URL: url, Secret: domain.NewSecret(testSecret), Events: events}
}

// testConfig delivers fast, to private addresses (the receivers are on
// loopback), on the guard's transport.
func testConfig(logs *logBuffer, conns ...*bundle.Connector) Config {
	cfg := Config{Connectors: map[string]*bundle.Connector{}, Transport: httptool.GuardedTransport(true),
		Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Timeout: 5 * time.Second,
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, c := range conns {
		cfg.Connectors[c.Name] = c
	}
	return cfg
}

func start(t *testing.T, cfg Config) *Deliverer {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// closeNow waits for every queued delivery to be made or given up.
func closeNow(t *testing.T, d *Deliverer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

var at = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func aTurn(id string, origin map[string]any) turn.Turn {
	return turn.Turn{ID: id, Instance: turn.InstanceKey{Swarm: "default", Key: "1712345678.000100", Agent: "assistant"},
		TraceID: "trace-" + id, Origin: origin, Status: turn.TurnCompleted}
}

// turnEvents are a turn's life: started, parked on a consent, resumed,
// completed, failed (not all in one real turn; enough to filter).
func turnEvents(id string) []turn.TurnEvent {
	ev := func(seq int64, typ, data string) turn.TurnEvent {
		return turn.TurnEvent{TurnID: id, Seq: seq, Type: typ, At: at.Add(time.Duration(seq) * time.Second), Data: json.RawMessage(data)}
	}
	return []turn.TurnEvent{
		ev(0, turn.EvTurnStarted, `{"inputType":"user.input"}`),
		ev(1, turn.EvToolCalled, `{"callId":"call-1","tool":"whoami","step":1}`),
		ev(2, turn.EvTurnParked, `{"callId":"call-1","tool":"whoami","authSessionId":"as-1","authorizationUrl":"https://idp.example.com/auth?client_id=demo"}`),
		ev(3, turn.EvTurnResumed, `{"authSessionId":"as-1","event":"auth.granted"}`),
		ev(4, turn.EvTurnCompleted, `{"steps":2,"final":"You are alice."}`),
		ev(5, turn.EvTurnFailed, `{"error":{"code":"x","message":"y"}}`),
	}
}

// verified checks a delivery the way a receiver does and returns its body.
func verified(t *testing.T, d delivery) Body {
	t.Helper()
	if err := Verify(testSecret, d.header.Get(HeaderTimestamp), string(d.body), d.header.Get(HeaderSignature), time.Now(), time.Minute); err != nil {
		t.Fatalf("delivery %s does not verify: %v", d.header.Get(HeaderDelivery), err)
	}
	var b Body
	if err := json.Unmarshal(d.body, &b); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	return b
}

func TestDeliver(t *testing.T) {
	rv := newReceiver(t)
	var logs logBuffer
	d := start(t, testConfig(&logs, connector("chat", rv.srv.URL+"/hooks/agentauth?tenant=acme")))
	tr := aTurn("turn-1", map[string]any{"connector": "chat", "channel": "C123"})
	d.Notify(context.Background(), tr, turnEvents("turn-1"))
	closeNow(t, d)

	got := rv.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want turn.parked and turn.completed", len(got))
	}
	slices.SortFunc(got, func(a, b delivery) int {
		return strings.Compare(a.header.Get(HeaderDelivery), b.header.Get(HeaderDelivery))
	})
	for i, want := range []struct {
		id, typ, data string
		seq           int64
	}{
		{"turn-1:2", "turn.parked", `"authorizationUrl":"https://idp.example.com/auth?client_id=demo"`, 2},
		{"turn-1:4", "turn.completed", `"final":"You are alice."`, 4},
	} {
		dl := got[i]
		for h, v := range map[string]string{"Content-Type": "application/json", "User-Agent": UserAgent, HeaderDelivery: want.id} {
			if g := dl.header.Get(h); g != v {
				t.Errorf("%s: %s = %q, want %q", want.id, h, g, v)
			}
		}
		if dl.path != "/hooks/agentauth?tenant=acme" {
			t.Errorf("posted to %s", dl.path)
		}
		b := verified(t, dl)
		if b.Connector != "chat" || b.Swarm != "default" || b.InstanceKey != "1712345678.000100" || b.Agent != "assistant" ||
			b.TurnID != "turn-1" || b.TraceID != "trace-turn-1" || b.Event.Type != want.typ || b.Event.Seq != want.seq ||
			!b.Event.At.Equal(at.Add(time.Duration(want.seq)*time.Second)) || !strings.Contains(string(b.Event.Data), want.data) ||
			b.Origin["channel"] != "C123" || b.Origin["connector"] != "chat" {
			t.Errorf("body %s", dl.body)
		}
		if bytes.Contains(dl.body, []byte(testSecret)) {
			t.Errorf("the body holds the secret")
		}
	}
	if n := logs.count(`"msg":"origin delivered"`); n != 2 {
		t.Errorf("%d delivered lines:\n%s", n, logs.String())
	}
}

// TestEventsFiltered: a connector gets the events its spec names, no other.
func TestEventsFiltered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		want   []string
	}{
		{"default", nil, []string{"turn-1:2", "turn-1:4"}},
		{"completed only", []string{bundle.ConnectorEventTurnCompleted}, []string{"turn-1:4"}},
		{"started and failed", []string{bundle.ConnectorEventTurnStarted, bundle.ConnectorEventTurnFailed}, []string{"turn-1:0", "turn-1:5"}},
		{"all four", []string{"turn.started", "turn.parked", "turn.completed", "turn.failed"}, []string{"turn-1:0", "turn-1:2", "turn-1:4", "turn-1:5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := newReceiver(t)
			var logs logBuffer
			d := start(t, testConfig(&logs, connector("chat", rv.srv.URL, tc.events...)))
			d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": "chat"}), turnEvents("turn-1"))
			closeNow(t, d)
			var ids []string
			for _, dl := range rv.deliveries() {
				ids = append(ids, dl.header.Get(HeaderDelivery))
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tc.want) {
				t.Errorf("delivered %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestRetries: network errors, 429 and 5xx are retried up to MaxAttempts
// with the same delivery id, signed anew each time; other answers are not.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		attempts int
		ok       bool
	}{
		{"500 twice, then 200", []int{500, 500, 200}, 3, true},
		{"429, then 202", []int{429, 202}, 2, true},
		{"connection dropped, then 204", []int{hangUp, 204}, 2, true},
		{"503 always: bounded", []int{503}, 5, false},
		{"400: not retried", []int{400}, 1, false},
		{"404: not retried", []int{404}, 1, false},
		{"302: not followed, not retried", []int{302}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := newReceiver(t, tc.statuses...)
			var logs logBuffer
			d := start(t, testConfig(&logs, connector("chat", rv.srv.URL)))
			d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": "chat"}), turnEvents("turn-1")[4:5])
			closeNow(t, d)
			got := rv.deliveries()
			if len(got) != tc.attempts {
				t.Fatalf("%d attempts, want %d:\n%s", len(got), tc.attempts, logs.String())
			}
			for _, dl := range got {
				if id := dl.header.Get(HeaderDelivery); id != "turn-1:4" {
					t.Errorf("delivery id %q on an attempt", id)
				}
				if dl.path == "/elsewhere" {
					t.Error("a redirect was followed")
				}
				verified(t, dl)
			}
			delivered, failed := logs.count(`"msg":"origin delivered"`), logs.count(`"msg":"origin delivery failed`)
			if tc.ok && (delivered != 1 || failed != 0) || !tc.ok && (delivered != 0 || failed != 1) {
				t.Errorf("delivered %d, failed %d lines:\n%s", delivered, failed, logs.String())
			}
		})
	}
}

func TestBackoffBounded(t *testing.T) {
	d := &Deliverer{cfg: Config{Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff}}
	var total time.Duration
	for n := 1; n < DefaultMaxAttempts; n++ {
		w := d.backoff(n)
		nominal := min(DefaultBackoff<<(n-1), DefaultMaxBackoff)
		if w < nominal/2 || w > nominal {
			t.Errorf("wait after attempt %d = %s, want within [%s, %s]", n, w, nominal/2, nominal)
		}
		total += w
	}
	if total > 70*time.Second {
		t.Errorf("the retries take %s, want about a minute at most", total)
	}
	if w := d.backoff(60); w > DefaultMaxBackoff {
		t.Errorf("wait after attempt 60 = %s (overflow?)", w)
	}
}

// TestNoOriginConnector: a turn whose origin names no connector delivers
// nothing, silently; a name the bundle lacks is one warning per turn.
func TestNoOriginConnector(t *testing.T) {
	for _, tc := range []struct {
		name     string
		origin   map[string]any
		warnings int
	}{
		{"no origin", nil, 0},
		{"an origin without a connector", map[string]any{"channel": "C123"}, 0},
		{"an empty connector", map[string]any{"connector": ""}, 0},
		{"a connector the bundle lacks", map[string]any{"connector": "cli"}, 1},
		{"a connector that is no string", map[string]any{"connector": 7}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := newReceiver(t)
			var logs logBuffer
			d := start(t, testConfig(&logs, connector("chat", rv.srv.URL)))
			tr := aTurn("turn-1", tc.origin)
			evs := turnEvents("turn-1")
			// The engine tells each commit: three calls for one turn.
			d.Notify(context.Background(), tr, evs[:2])
			d.Notify(context.Background(), tr, evs[2:4])
			d.Notify(context.Background(), tr, evs[4:])
			closeNow(t, d)
			if n := len(rv.deliveries()); n != 0 {
				t.Errorf("%d deliveries", n)
			}
			if n := logs.count(`"level":"WARN"`); n != tc.warnings {
				t.Errorf("%d warnings, want %d:\n%s", n, tc.warnings, logs.String())
			}
		})
	}
	t.Run("each turn is warned about once", func(t *testing.T) {
		var logs logBuffer
		d := start(t, testConfig(&logs))
		for _, id := range []string{"turn-1", "turn-2", "turn-1", "turn-2", "turn-3"} {
			d.Notify(context.Background(), aTurn(id, map[string]any{"connector": "cli"}), turnEvents(id))
		}
		if n := logs.count(`"msg":"origin connector is not a Connector of the bundle`); n != 3 {
			t.Errorf("%d warnings, want 3:\n%s", n, logs.String())
		}
	})
}

// TestGuardRefusesPrivate: without AllowPrivateUpstreams the guard keeps a
// delivery from a loopback receiver, and a refusal is not retried.
func TestGuardRefusesPrivate(t *testing.T) {
	rv := newReceiver(t)
	var logs logBuffer
	cfg := testConfig(&logs, connector("chat", rv.srv.URL))
	cfg.Transport = httptool.GuardedTransport(false)
	d := start(t, cfg)
	d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": "chat"}), turnEvents("turn-1"))
	closeNow(t, d)
	if n := len(rv.deliveries()); n != 0 {
		t.Fatalf("the guard let %d deliveries reach loopback", n)
	}
	if n := logs.count("the upstream guard refused the address"); n != 2 {
		t.Errorf("%d refusals logged, want 2 (one per delivery, no retry):\n%s", n, logs.String())
	}
	if n := logs.count("retrying"); n != 0 {
		t.Errorf("a refusal was retried:\n%s", logs.String())
	}
}

// TestQueueFullDropsOldest: Notify never waits for a receiver; a full
// queue drops its oldest delivery, with a warning.
func TestQueueFullDropsOldest(t *testing.T) {
	rv := newReceiver(t)
	rv.hold = make(chan struct{})
	var logs logBuffer
	cfg := testConfig(&logs, connector("chat", rv.srv.URL, "turn.started", "turn.parked", "turn.completed", "turn.failed"))
	cfg.Workers, cfg.QueueSize = 1, 2
	d := start(t, cfg)
	evs := turnEvents("turn-1")
	tr := aTurn("turn-1", map[string]any{"connector": "chat"})
	d.Notify(context.Background(), tr, evs[:1])
	if id := <-rv.arrived; id != "turn-1:0" {
		t.Fatalf("first delivery %s", id)
	}
	// The only worker is held by the receiver: the rest queue.
	begin := time.Now()
	d.Notify(context.Background(), tr, evs[1:])
	if el := time.Since(begin); el > time.Second {
		t.Errorf("Notify took %s while the receiver was busy", el)
	}
	close(rv.hold)
	closeNow(t, d)
	var ids []string
	for _, dl := range rv.deliveries() {
		ids = append(ids, dl.header.Get(HeaderDelivery))
	}
	// Queued in turn: :2, :4, :5 (tool.called and turn.resumed are no
	// connector's events); with room for two, :2 was dropped.
	if want := []string{"turn-1:0", "turn-1:4", "turn-1:5"}; !slices.Equal(ids, want) {
		t.Errorf("delivered %v, want %v", ids, want)
	}
	if n := logs.count(`"msg":"origin delivery queue full: dropped the oldest delivery"`); n != 1 || logs.count(`"deliveryId":"turn-1:2"`) != 1 {
		t.Errorf("%d drop warnings:\n%s", n, logs.String())
	}
}

// TestCloseOutOfTime: Close gives up at its deadline, stops the attempt in
// flight and says how many were dropped; nothing is queued after Close.
func TestCloseOutOfTime(t *testing.T) {
	rv := newReceiver(t)
	rv.hold = make(chan struct{})
	defer close(rv.hold)
	var logs logBuffer
	cfg := testConfig(&logs, connector("chat", rv.srv.URL))
	cfg.Workers = 1
	d := start(t, cfg)
	tr := aTurn("turn-1", map[string]any{"connector": "chat"})
	d.Notify(context.Background(), tr, turnEvents("turn-1"))
	<-rv.arrived
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); err == nil || !strings.Contains(err.Error(), "1 deliveries not made") {
		t.Fatalf("Close = %v", err)
	}
	if logs.count("origin delivery abandoned") != 1 || logs.count(`"msg":"origin deliveries dropped at shutdown","count":1`) != 1 {
		t.Errorf("log:\n%s", logs.String())
	}
	d.Notify(context.Background(), aTurn("turn-2", map[string]any{"connector": "chat"}), turnEvents("turn-2"))
	if n := logs.count("the deliverer is closed"); n != 2 {
		t.Errorf("%d deliveries refused after Close, want 2:\n%s", n, logs.String())
	}
	if err := d.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestSecretNeverLogged: neither the secret nor the URL's path and query
// (a webhook URL's path is often a credential) appear in any log line,
// whatever happens to the delivery.
func TestSecretNeverLogged(t *testing.T) {
	const canary = "CANARY-7f3a9c-secret-never-logged-0123456789"
	const pathCanary = "CANARY-path-b41e"
	for _, tc := range []struct {
		name     string
		statuses []int
		guard    bool
		origin   string
	}{
		{"delivered", nil, false, "chat"},
		{"retried then failed", []int{500}, false, "chat"},
		{"refused 401", []int{401}, false, "chat"},
		{"connection dropped", []int{hangUp}, false, "chat"},
		{"refused by the guard", nil, true, "chat"},
		{"an unknown connector", nil, false, "cli"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := newReceiver(t, tc.statuses...)
			var logs logBuffer
			c := connector("chat", rv.srv.URL+"/services/"+pathCanary+"?token="+pathCanary)
			c.Secret = domain.NewSecret(canary)
			cfg := testConfig(&logs, c)
			if tc.guard {
				cfg.Transport = httptool.GuardedTransport(false)
			}
			d := start(t, cfg)
			d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": tc.origin}), turnEvents("turn-1"))
			closeNow(t, d)
			out := logs.String()
			if out == "" {
				t.Fatal("nothing logged: the test would prove nothing")
			}
			if strings.Contains(out, canary) || strings.Contains(out, pathCanary) {
				t.Errorf("a secret reached the log:\n%s", out)
			}
			for _, dl := range rv.deliveries() {
				if bytes.Contains(dl.body, []byte(canary)) || strings.Contains(strings.Join(slices.Concat(dl.header.Values(HeaderSignature), dl.header.Values(HeaderDelivery)), " "), canary) {
					t.Errorf("the secret was sent")
				}
				if err := Verify(canary, dl.header.Get(HeaderTimestamp), string(dl.body), dl.header.Get(HeaderSignature), time.Now(), time.Minute); err != nil {
					t.Errorf("signed with another key: %v", err)
				}
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no transport", Config{}},
		{"another type", Config{Transport: http.DefaultTransport, Connectors: map[string]*bundle.Connector{"x": {Name: "x", Type: "email"}}}},
		{"a nil connector", Config{Transport: http.DefaultTransport, Connectors: map[string]*bundle.Connector{"x": nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d, err := New(tc.cfg); err == nil {
				_ = d.Close(context.Background())
				t.Fatal("New accepted it")
			}
		})
	}
}
