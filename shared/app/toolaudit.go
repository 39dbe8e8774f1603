package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// The stored audit stream of tool calls: which log, at which retention,
// and how the hooks append to it.

// retainedToolAudit is log keeping records for retention, or nil when
// retention is 0 (AGENTAUTH_AUDIT_RETENTION=0: no stored stream).
func retainedToolAudit(log domain.ToolAuditLog, retention time.Duration) domain.ToolAuditLog {
	if log == nil || retention <= 0 {
		return nil
	}
	if r, ok := log.(interface {
		WithRetention(time.Duration) domain.ToolAuditLog
	}); ok {
		return r.WithRetention(retention)
	}
	return log
}

// Audit sink settings. A long-lived server hands records to a background
// writer (about 1 µs added to a call; a burst past the buffer is dropped
// and counted); a Lambda appends in the call, within a second, because a
// frozen function runs no background writer and a queue left in memory is
// lost when the environment is shut down.
const (
	auditBuffer        = 4096
	auditServeTimeout  = 5 * time.Second
	auditLambdaTimeout = time.Second
)

// newAuditSink is the hooks' sink into log (nil without a stored stream).
func newAuditSink(log domain.ToolAuditLog, lambda bool, l *slog.Logger) *toolhooks.AuditSink {
	if log == nil {
		return nil
	}
	if lambda {
		return toolhooks.NewAuditSink(log, toolhooks.AuditOptions{Timeout: auditLambdaTimeout, Log: l})
	}
	return toolhooks.NewAuditSink(log, toolhooks.AuditOptions{Buffer: auditBuffer, Timeout: auditServeTimeout, Log: l})
}

// sweepAudit removes the audit files past the retention (DynamoDB's TTL
// does it on AWS).
func (a *App) sweepAudit(ctx context.Context) {
	if a.auditSweep == nil {
		return
	}
	if n, err := a.auditSweep.Sweep(ctx); err != nil {
		a.log.WarnContext(ctx, "tool audit sweep failed", "err", err)
	} else if n > 0 {
		a.log.InfoContext(ctx, "tool audit days removed", "days", n)
	}
}

// closeAudit writes the records still queued while ctx lasts.
func (a *App) closeAudit(ctx context.Context) error {
	if a.audit == nil {
		return nil
	}
	return a.audit.Close(ctx)
}
