package toolhooks

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// AuditSink keeps the audit stream: it joins each agent.toolReturned with
// the agent.toolCalled of the same call and appends one domain.ToolAudit
// to a domain.ToolAuditLog. Like the events, a record is content-free: the
// argsHash and the error code, never an argument, a result or an error
// message.
//
// Appending never fails a tool call and never holds it long: with a
// Buffer the record goes to a bounded queue that one background writer
// drains (a full queue drops the record); without one the append runs in
// the call with a short Timeout. Either way a record that is not stored is
// counted (Stats) and logged, at most once per LogEvery.
//
// The join is in memory: Hooks.Invoke emits both events of a call from
// one process, in order, and tags them as one call, so a toolCalled waits
// in a bounded map until its toolReturned. A toolCalled whose toolReturned
// never comes is dropped after PendingTTL; past MaxPending the oldest
// waiting one makes room. A toolReturned without its toolCalled (evicted,
// or emitted by other code) is still recorded, with what it carries: no
// principal, no tenant, no argsHash.
type AuditSink struct {
	log  domain.ToolAuditLog
	opts AuditOptions

	mu        sync.Mutex
	pending   map[any]pendingCall
	lastSweep time.Time

	queue chan domain.ToolAudit
	done  chan struct{}
	// inflight counts records queued or being written (Flush waits for 0).
	inflight atomic.Int64
	closed   atomic.Bool
	closeMu  sync.RWMutex

	dropped, failed, expired, evicted, unmatched, written atomic.Uint64
	lastLog                                               atomic.Int64
}

// AuditOptions tune an AuditSink; zero values take the defaults.
type AuditOptions struct {
	// Buffer > 0: records are queued (at most Buffer) and written by a
	// background writer; 0: written in the call, within Timeout.
	Buffer int
	// Timeout bounds one append (default 2 s; the background writer's
	// too).
	Timeout time.Duration
	// MaxPending bounds the toolCalled events waiting for their
	// toolReturned (default 10,000).
	MaxPending int
	// PendingTTL is how long a toolCalled waits (default 1 h: longer than
	// any tool's time limit).
	PendingTTL time.Duration
	// LogEvery spaces the warnings about records not stored (default
	// 10 s); the first is logged at once.
	LogEvery time.Duration
	Log      *slog.Logger
	Now      func() time.Time
}

// AuditStats count what an AuditSink did since it started.
type AuditStats struct {
	Written   uint64 // records appended
	Dropped   uint64 // records not queued: the buffer was full, or the sink closed
	Failed    uint64 // appends that failed or ran past the timeout
	Expired   uint64 // toolCalled events whose toolReturned never came
	Evicted   uint64 // toolCalled events dropped to keep MaxPending
	Unmatched uint64 // toolReturned events recorded without their toolCalled
	Pending   int    // toolCalled events waiting now
}

type pendingCall struct {
	ev ToolCalled
	at time.Time
}

// NewAuditSink builds the sink over log and, with a Buffer, starts its
// writer (stop it with Close).
func NewAuditSink(log domain.ToolAuditLog, opts AuditOptions) *AuditSink {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 10_000
	}
	if opts.PendingTTL <= 0 {
		opts.PendingTTL = time.Hour
	}
	if opts.LogEvery <= 0 {
		opts.LogEvery = 10 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &AuditSink{log: log, opts: opts, pending: map[any]pendingCall{}, lastSweep: opts.Now()}
	if opts.Buffer > 0 {
		s.queue = make(chan domain.ToolAudit, opts.Buffer)
		s.done = make(chan struct{})
		go s.writer()
	}
	return s
}

// joinKey is what pairs the two events of a call: the tag Hooks.Invoke
// puts on both, else (events built elsewhere) agent, tool and call id.
type joinKey struct{ agent, tool, call string }

func calledKey(e ToolCalled) any {
	if e.call != nil {
		return e.call
	}
	return joinKey{e.AgentID, e.ToolName, e.CallID}
}

func returnedKey(e ToolReturned) any {
	if e.call != nil {
		return e.call
	}
	return joinKey{e.AgentID, e.ToolName, e.CallID}
}

// Emit takes an event. It never returns an error: a record that cannot be
// stored is counted and logged, and the call goes on.
func (s *AuditSink) Emit(ctx context.Context, ev any) error {
	switch e := ev.(type) {
	case ToolCalled:
		s.called(ctx, e)
	case ToolReturned:
		s.returned(ctx, e)
	}
	return nil
}

func (s *AuditSink) called(ctx context.Context, e ToolCalled) {
	now := s.opts.Now()
	s.mu.Lock()
	s.sweepLocked(now)
	if len(s.pending) >= s.opts.MaxPending {
		s.evictOldestLocked()
	}
	s.pending[calledKey(e)] = pendingCall{ev: e, at: now}
	s.mu.Unlock()
}

func (s *AuditSink) returned(ctx context.Context, e ToolReturned) {
	now := s.opts.Now()
	k := returnedKey(e)
	s.mu.Lock()
	c, ok := s.pending[k]
	delete(s.pending, k)
	s.mu.Unlock()
	r := domain.ToolAudit{At: now.UTC(), CallID: e.CallID, Tool: e.ToolName, AgentID: e.AgentID, Status: e.Status, DurationMs: e.DurationMs}
	if e.Consent {
		r.Status = domain.ToolAuditConsent
	}
	if e.Error != nil {
		r.ErrorCode = e.Error.Code // never the message: it may quote what the tool saw
	}
	if ok {
		r.Principal, r.Tenant, r.Transport, r.Via, r.ArgsHash = c.ev.Principal, c.ev.Tenant, c.ev.Transport, c.ev.Via, c.ev.ArgsHash
	} else {
		s.unmatched.Add(1)
		s.warn(ctx, "tool audit: a toolReturned without its toolCalled is recorded without principal, tenant and argsHash", "toolName", e.ToolName, "callId", e.CallID)
	}
	s.append(ctx, r)
}

// sweepLocked drops the toolCalled events past PendingTTL, at most once a
// minute (or a tenth of the TTL).
func (s *AuditSink) sweepLocked(now time.Time) {
	every := min(time.Minute, s.opts.PendingTTL/10)
	if now.Sub(s.lastSweep) < every {
		return
	}
	s.lastSweep = now
	n := 0
	for k, c := range s.pending {
		if now.Sub(c.at) >= s.opts.PendingTTL {
			delete(s.pending, k)
			n++
		}
	}
	if n > 0 {
		s.expired.Add(uint64(n))
		s.opts.Log.Warn("tool audit: toolCalled events never returned; dropped", "events", n, "after", s.opts.PendingTTL.String())
	}
}

// evictOldestLocked makes room for one: rare (MaxPending calls running
// at once), so a scan is cheaper than keeping an order.
func (s *AuditSink) evictOldestLocked() {
	var oldest any
	var at time.Time
	for k, c := range s.pending {
		if oldest == nil || c.at.Before(at) {
			oldest, at = k, c.at
		}
	}
	delete(s.pending, oldest)
	s.evicted.Add(1)
	s.warn(context.Background(), "tool audit: too many calls waiting for their toolReturned; the oldest dropped", "maxPending", s.opts.MaxPending)
}

func (s *AuditSink) append(ctx context.Context, r domain.ToolAudit) {
	if s.queue == nil {
		s.write(context.WithoutCancel(ctx), r)
		return
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed.Load() {
		s.drop(ctx, "the sink is closed")
		return
	}
	s.inflight.Add(1)
	select {
	case s.queue <- r:
	default:
		s.inflight.Add(-1)
		s.drop(ctx, "the buffer is full")
	}
}

func (s *AuditSink) drop(ctx context.Context, why string) {
	n := s.dropped.Add(1)
	s.warn(ctx, "tool audit: record dropped", "reason", why, "droppedSoFar", n)
}

// write appends r within the timeout; the caller's cancellation does not
// cut it short (a record of a call the client gave up on is still one).
func (s *AuditSink) write(ctx context.Context, r domain.ToolAudit) {
	wctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.log.AppendToolAudit(wctx, r); err != nil {
		n := s.failed.Add(1)
		why := "failed"
		if errors.Is(err, context.DeadlineExceeded) {
			why = "timed out"
		}
		s.warn(ctx, "tool audit: record not stored", "reason", why, "err", err, "failedSoFar", n)
		return
	}
	s.written.Add(1)
}

func (s *AuditSink) writer() {
	defer close(s.done)
	for r := range s.queue {
		s.write(context.Background(), r)
		s.inflight.Add(-1)
	}
}

// warn logs at most once per LogEvery, so that a store outage under load
// is a few lines with counts, not one per call.
func (s *AuditSink) warn(ctx context.Context, msg string, args ...any) {
	now := s.opts.Now().UnixNano()
	last := s.lastLog.Load()
	if last != 0 && now-last < int64(s.opts.LogEvery) {
		return
	}
	if !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	st := s.Stats()
	args = append(args, "dropped", st.Dropped, "failed", st.Failed, "unmatched", st.Unmatched, "evicted", st.Evicted)
	s.opts.Log.WarnContext(ctx, msg, args...)
}

// Stats says what the sink did so far.
func (s *AuditSink) Stats() AuditStats {
	s.mu.Lock()
	p := len(s.pending)
	s.mu.Unlock()
	return AuditStats{Written: s.written.Load(), Dropped: s.dropped.Load(), Failed: s.failed.Load(), Expired: s.expired.Load(),
		Evicted: s.evicted.Load(), Unmatched: s.unmatched.Load(), Pending: p}
}

// Flush waits until every record queued so far is written (or failed),
// or ctx ends.
func (s *AuditSink) Flush(ctx context.Context) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for s.inflight.Load() > 0 {
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops taking records and writes those queued while ctx lasts.
func (s *AuditSink) Close(ctx context.Context) error {
	if s.queue == nil {
		return nil
	}
	s.closeMu.Lock()
	if !s.closed.Swap(true) {
		close(s.queue)
	}
	s.closeMu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ Sink = (*AuditSink)(nil)
