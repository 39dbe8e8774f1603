package lambdaentry

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// live is the function a Lambda execution environment runs. With a git
// bundle it follows the active revision: the OAuth core and the callback
// routes (and the turn function's OAuth core) are built once per
// revision, so when the head moves the function is built again on the new
// one and swapped in. Lambda runs no code between invocations, so the
// check runs on an invocation, before it is handled, at most once per
// every (AGENTAUTH_UPLOADS_CHECK_SECONDS): an invocation that starts
// every or more after a commit landed runs on that revision or a newer
// one. The check is one strongly consistent read of the head (GetItem on
// AWS); the rebuild wires the function again on the new revision and the
// same backends (their clients, and the git objects they cached).
type live struct {
	cur   atomic.Pointer[function]
	every time.Duration
	// head reads the active revision ("git:<sha>"); nil for a plain
	// directory, which never changes.
	head    func(ctx context.Context) (string, error)
	rebuild func(ctx context.Context) (*function, error)
	now     func() time.Time
	log     *slog.Logger

	// checking is held by the invocation that checks; another one meanwhile
	// runs on the current function rather than wait.
	checking sync.Mutex
	checked  time.Time // guarded by checking
}

func newLive(f *function, rebuild func(context.Context) (*function, error), every time.Duration, log *slog.Logger) *live {
	l := &live{every: every, rebuild: rebuild, now: time.Now, log: log}
	l.cur.Store(f)
	if f.app.Changesets != nil {
		// The active revision's bundle: one read of the head, and the
		// bundle kept by its ref (loaded once when it moves).
		l.head = func(ctx context.Context) (string, error) {
			b, err := l.cur.Load().app.Active(ctx)
			if err != nil {
				return "", err
			}
			return b.Revision, nil
		}
		l.checked = l.now()
	}
	return l
}

// Invoke handles one event on the function of the active revision.
func (l *live) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	return l.current(ctx).Invoke(ctx, raw)
}

// current is the function to run this invocation on: the one built
// before, or one built again when the check is due and the head moved. A
// head that cannot be read, or a revision that cannot be built, keeps the
// running function (logged) until the next check.
func (l *live) current(ctx context.Context) *function {
	f := l.cur.Load()
	if l.head == nil || !l.checking.TryLock() {
		return f
	}
	defer l.checking.Unlock()
	now := l.now()
	if now.Sub(l.checked) < l.every {
		return f
	}
	l.checked = now
	rev, err := l.head(ctx)
	if err != nil {
		l.log.WarnContext(ctx, "active bundle revision unreadable; running the one built before", "revision", f.app.Bundle.Revision, "err", err)
		return f
	}
	if rev == f.app.Bundle.Revision {
		return f
	}
	start := l.now()
	nf, err := l.rebuild(ctx)
	if err != nil {
		l.log.ErrorContext(ctx, "bundle revision not taken up; running the one built before", "revision", f.app.Bundle.Revision,
			"active", rev, "err", err)
		return f
	}
	l.cur.Store(nf)
	// Nothing runs on the old one between invocations; what it still
	// queued (origin deliveries) is sent now.
	if err := f.app.Close(ctx); err != nil {
		l.log.WarnContext(ctx, "closing the function of the previous revision", "err", err)
	}
	l.log.InfoContext(ctx, "bundle revision taken up", "previous", f.app.Bundle.Revision, "revision", nf.app.Bundle.Revision,
		"ms", l.now().Sub(start).Milliseconds())
	return nf
}
