package httpx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWantsEventStream(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"application/json"}, false},
		{[]string{"text/event-stream"}, true},
		{[]string{"Text/Event-Stream; charset=utf-8"}, true},
		{[]string{"application/json, text/event-stream;q=0.5"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"text/event-stream;q=0"}, false},
		{[]string{"text/event-streams"}, false},
		{[]string{"text/*"}, false},
		{[]string{";;;"}, false},
	} {
		t.Run(strings.Join(tc.accept, "|"), func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x", nil)
			for _, v := range tc.accept {
				r.Header.Add("Accept", v)
			}
			if got := WantsEventStream(r); got != tc.want {
				t.Fatalf("WantsEventStream(%q) = %v", tc.accept, got)
			}
		})
	}
}

// open opens a stream on a recorder, behind Observe's writer as every
// route's stream is.
func open(t *testing.T, lim StreamLimits) (*Stream, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil).WithContext(context.WithValue(t.Context(), requestIDKey{}, "req-9"))
	s, err := OpenStream(&statusWriter{ResponseWriter: rec}, req, lim)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

func TestStreamWireForm(t *testing.T) {
	s, rec := open(t, StreamLimits{})
	if rec.Code != 200 || !rec.Flushed {
		t.Fatalf("open: %d, flushed %v", rec.Code, rec.Flushed)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if rec.Header().Get(k) != v {
			t.Fatalf("%s = %q, want %q", k, rec.Header().Get(k), v)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"event", func() error { return s.Event("7", "turn.started", []byte(`{"seq":7}`)) }, "id: 7\nevent: turn.started\ndata: {\"seq\":7}\n\n"},
		{"multi-line data", func() error { return s.Event("8", "x", []byte("a\nb\r\nc\rid: 9")) }, "id: 8\nevent: x\ndata: a\ndata: b\ndata: c\ndata: id: 9\n\n"},
		{"no id, no data", func() error { return s.Event("", "ping", nil) }, "event: ping\ndata:\n\n"},
		{"comment", func() error { return s.Comment("keep\nalive") }, ": keep alive\n\n"},
	}
	for _, st := range steps {
		rec.Body.Reset()
		if err := st.do(); err != nil || rec.Body.String() != st.want {
			t.Fatalf("%s: %q, %v; want %q", st.name, rec.Body, err, st.want)
		}
	}
	rec.Body.Reset()
	for _, bad := range []struct{ id, event string }{{"1\n", "x"}, {"1", "x\ny"}, {"1\x00", "x"}} {
		if err := s.Event(bad.id, bad.event, nil); err == nil {
			t.Fatalf("event %q/%q accepted", bad.id, bad.event)
		}
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("a refused event was written: %q", rec.Body)
	}
}

// plainWriter cannot flush.
type plainWriter struct{ h http.Header }

func (w *plainWriter) Header() http.Header         { return w.h }
func (w *plainWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *plainWriter) WriteHeader(int)             { panic("a writer that cannot flush got a header") }

func TestOpenStreamRefusesAWriterThatCannotFlush(t *testing.T) {
	_, err := OpenStream(&statusWriter{ResponseWriter: &plainWriter{h: http.Header{}}}, httptest.NewRequest("GET", "/x", nil), StreamLimits{})
	if !errors.Is(err, ErrNoFlush) {
		t.Fatalf("err = %v", err)
	}
}

func TestEncodeJSONIsWriteJSONsBody(t *testing.T) {
	v := map[string]any{"data": []string{"a&b <c>", "é"}}
	rec := httptest.NewRecorder()
	WriteJSON(rec, 200, v)
	got, err := EncodeJSON(v)
	if err != nil || string(got)+"\n" != rec.Body.String() {
		t.Fatalf("EncodeJSON %q, WriteJSON %q (%v)", got, rec.Body, err)
	}
}

func TestFollow(t *testing.T) {
	boom := errors.New("store down")
	for _, tc := range []struct {
		name  string
		lim   StreamLimits
		every time.Duration
		// poll is called with its call number (from 0).
		poll    func(n int, s *Stream) (bool, error)
		cancel  bool
		wantErr error
		// want are the stream's lines (empty ones dropped), in order;
		// keepAlives is the least number of keep-alive comments.
		want       []string
		keepAlives int
	}{
		{name: "done after three polls", every: time.Millisecond,
			poll: func(n int, s *Stream) (bool, error) { return n == 2, s.Event(fmt.Sprint(n), "e", []byte("d")) },
			want: []string{"id: 0", "event: e", "data: d", "id: 1", "event: e", "data: d", "id: 2", "event: e", "data: d"}},
		{name: "keep-alive while nothing happens", lim: StreamLimits{KeepAlive: 5 * time.Millisecond}, every: 2 * time.Millisecond,
			poll:       func(n int, s *Stream) (bool, error) { return n == 30, nil },
			keepAlives: 2},
		{name: "maximum duration", lim: StreamLimits{MaxDuration: 30 * time.Millisecond}, every: time.Millisecond,
			poll: func(int, *Stream) (bool, error) { return false, nil },
			want: []string{": " + CommentMaxStream}},
		{name: "poll fails", every: time.Millisecond,
			poll:    func(n int, s *Stream) (bool, error) { return false, boom },
			wantErr: boom, want: []string{": the stream failed; reconnect with Last-Event-ID to go on (request req-9)"}},
		{name: "client gone", every: time.Millisecond, cancel: true,
			poll:    func(int, *Stream) (bool, error) { return false, nil },
			wantErr: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec := open(t, tc.lim)
			rec.Body.Reset()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			n := 0
			err := s.Follow(ctx, tc.every, func(_ context.Context, s *Stream) (bool, error) {
				defer func() { n++ }()
				if n > 1000 {
					t.Fatal("polled more than 1000 times")
				}
				if tc.cancel && n == 1 {
					cancel()
				}
				return tc.poll(n, s)
			})
			if !errors.Is(err, tc.wantErr) || err != nil && tc.wantErr == nil {
				t.Fatalf("Follow = %v, want %v", err, tc.wantErr)
			}
			var lines []string
			keepAlives := 0
			for l := range strings.Lines(rec.Body.String()) {
				switch l = strings.TrimSuffix(l, "\n"); l {
				case "":
				case ": " + CommentKeepAlive:
					keepAlives++
				default:
					lines = append(lines, l)
				}
			}
			if strings.Join(lines, "|") != strings.Join(tc.want, "|") || keepAlives < tc.keepAlives {
				t.Fatalf("stream %q (%d keep-alives), want %q (%d at least)", lines, keepAlives, tc.want, tc.keepAlives)
			}
		})
	}
}

func TestStreamEndsBeforeTheRequestDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), deadlineMargin+40*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	s, err := OpenStream(rec, httptest.NewRequest("GET", "/x", nil).WithContext(ctx), StreamLimits{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Follow(ctx, time.Millisecond, func(context.Context, *Stream) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rec.Body.String(), ": "+CommentMaxStream+"\n\n") || time.Since(start) > deadlineMargin {
		t.Fatalf("after %v: %q", time.Since(start), rec.Body)
	}
}

// TestStreamOutlivesTheServerTimeouts: a server whose read and write
// timeouts are far shorter than the stream (agentauth serve's are 15 s and
// 70 s) neither cancels it nor cuts it, and each event reaches the client
// while the handler still runs (flushed through Observe's writer). Without
// the write deadline's move the stream is cut at the WriteTimeout.
func TestStreamOutlivesTheServerTimeouts(t *testing.T) {
	const events = 12
	read := make(chan int, events)
	srv := httptest.NewUnstartedServer(Observe(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := OpenStream(w, r, StreamLimits{KeepAlive: time.Hour})
		if err != nil {
			t.Error(err)
			return
		}
		i := 0
		err = s.Follow(r.Context(), 25*time.Millisecond, func(ctx context.Context, s *Stream) (bool, error) {
			if err := s.Event(fmt.Sprint(i), "tick", []byte("x")); err != nil {
				return false, err
			}
			// The client has read this event before the next is written.
			select {
			case got := <-read:
				if got != i {
					return false, fmt.Errorf("client read %d, want %d", got, i)
				}
			case <-time.After(5 * time.Second):
				return false, errors.New("the client never read the event: not flushed")
			}
			i++
			return i == events, nil
		})
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
	})))
	srv.Config.ReadTimeout = 50 * time.Millisecond
	srv.Config.WriteTimeout = 100 * time.Millisecond
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	got := 0
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if id != fmt.Sprint(got) {
				t.Fatalf("event %s, want %d", id, got)
			}
			read <- got
			got++
		}
	}
	if err := sc.Err(); err != nil || got != events {
		t.Fatalf("read %d events of %d over %v: %v", got, events, time.Duration(events)*25*time.Millisecond, err)
	}
}

// FuzzEventData: whatever an event's data holds, it cannot start a field
// of its own or end the event early: every line the event writes is its
// id, its type or a data line, and the data lines join back to the data.
func FuzzEventData(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "a\nid: 9\n\nevent: x", "\r\r\n\n", "", "data: x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		s, rec := open(t, StreamLimits{})
		rec.Body.Reset()
		if err := s.Event("1", "e", []byte(data)); err != nil {
			t.Fatal(err)
		}
		out, ok := strings.CutSuffix(rec.Body.String(), "\n\n")
		if !ok {
			t.Fatalf("the event does not end with a blank line: %q", rec.Body)
		}
		lines := strings.Split(out, "\n")
		if lines[0] != "id: 1" || lines[1] != "event: e" {
			t.Fatalf("head %q", lines[:2])
		}
		var got []string
		for _, l := range lines[2:] {
			d, ok := strings.CutPrefix(l, "data:")
			if !ok || strings.ContainsAny(l, "\r") {
				t.Fatalf("line %q of %q is not a data line", l, rec.Body)
			}
			got = append(got, strings.TrimPrefix(d, " "))
		}
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(data)
		want = strings.TrimSuffix(want, "\n") // a last line break ends the last line
		if strings.Join(got, "\n") != want {
			t.Fatalf("data lines %q, want %q", got, want)
		}
	})
}
