package console

import (
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// when renders a time for the viewer: exact UTC in the markup and on
	// hover; console.js rewrites the text in the viewer's zone.
	"when": func(t any) template.HTML {
		var at time.Time
		switch v := t.(type) {
		case time.Time:
			at = v
		case *time.Time:
			if v == nil {
				return "—"
			}
			at = *v
		}
		if at.IsZero() {
			return "—"
		}
		u := at.UTC()
		return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" title="` + u.Format("2006-01-02 15:04:05 MST") + `">` +
			u.Format("2006-01-02 15:04 MST") + `</time>`)
	},
	"join": func(s []string) string { return strings.Join(s, " ") },
	// ms is a short duration for a person: "0.4 ms", "12 ms", "1.2 s".
	"ms": func(d time.Duration) string {
		switch {
		case d < 10*time.Millisecond:
			return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
		case d < time.Second:
			return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"short": func(s string) string { return shortRef(s) },
	// status is the class of a status badge: one colour per meaning.
	"status": func(s string) string {
		switch s {
		case stActive, stCompleted, "ok":
			return "st-ok"
		case stPending, "running", "parked", "paused", "rate_limited", domain.ToolAuditConsent:
			return "st-wait"
		case stFailed, "error", "conflict", "rejected", "forbidden":
			return "st-fail"
		}
		return "st-off" // revoked, expired, terminated, interrupted
	},
	"sum": func(m map[string]int, keys ...string) int {
		n := 0
		for _, k := range keys {
			n += m[k]
		}
		return n
	},
}

// shortRef shortens a git revision for a table (git:<12 hex>).
func shortRef(s string) string {
	if rest, ok := strings.CutPrefix(s, "git:"); ok && len(rest) > 12 {
		return "git:" + rest[:12]
	}
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}
