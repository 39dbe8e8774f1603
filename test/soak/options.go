package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// options are the soak's flags. Every rate is per second; every bound is
// a flag with the default documented in its usage text.
type options struct {
	bin      string
	duration time.Duration
	interval time.Duration
	baseline time.Duration
	idle     time.Duration
	warmup   float64
	keep     bool

	// sessionRetention and dedupWindow are the server's retention
	// windows (0: its defaults, 24 h).
	sessionRetention, dedupWindow time.Duration

	mix mix

	limits limits
}

// mix is the load: what is sent, how fast, how much at once.
type mix struct {
	tokenRate, toolRate, turnRate, mcpRate float64
	instances                              int
	consentSubjects                        int
	principals                             int
	maxInFlight                            int
}

// limits decide the verdict.
type limits struct {
	cpuSlope        float64 // percentage points of a core per hour
	rssSlope        float64 // MiB per hour
	goroutinesSlope float64 // per hour
	heapSlope       float64 // MiB per hour
	fdsSlope        float64 // per hour
	filesSlope      float64 // per hour
	p50Slope        float64 // percent of the route's mean p50 per hour
	noise           float64 // standard errors a slope must exceed to count
	idleCPU         float64 // percentage points above the baseline
	idleRSS         float64 // MiB above the baseline
	idleGoroutines  int     // above the baseline
	idleHeap        float64 // MiB above the baseline
	idleFDs         int     // above the baseline
	errorRate       float64 // fraction of a route's requests
}

// errHelp asks for the flags' list.
var errHelp = flag.ErrHelp

func parseOptions(args []string) (options, error) {
	var o options
	fs := o.flags()
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("soak: %w", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("soak: unexpected argument %q", fs.Arg(0))
	}
	return o, o.check()
}

// usage writes the flags with their defaults.
func usage(w io.Writer) {
	var o options
	fs := o.flags()
	fs.SetOutput(w)
	fmt.Fprintln(w, "Usage: soak [flags]  (make soak SOAK_DURATION=2m SOAK_ARGS='--turn-rate 20')")
	fs.PrintDefaults()
}

// flags binds the flags to o, with their defaults.
func (o *options) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.bin, "bin", "bin/agentauth", "the agentauth binary to serve with")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to send load (at most 24h)")
	fs.DurationVar(&o.interval, "interval", 15*time.Second, "time between sample lines")
	fs.DurationVar(&o.baseline, "baseline", 15*time.Second, "idle time before the load, measured as the baseline")
	fs.DurationVar(&o.idle, "idle", time.Minute, "idle time after the load within which the levels must come back")
	fs.Float64Var(&o.warmup, "warmup", 0.2, "fraction of the load time left out of the slopes")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary home, bundle and server logs")
	fs.DurationVar(&o.sessionRetention, "session-retention", 5*time.Minute, "the server's AGENTAUTH_SESSION_RETENTION, so that the finished sessions level off within the run (0: the server's default, 24h)")
	fs.DurationVar(&o.dedupWindow, "dedup-window", 5*time.Minute, "the server's AGENTAUTH_QUEUE_DEDUP_WINDOW, so that the queue's tombstones level off within the run (0: the server's default, 24h)")

	fs.Float64Var(&o.mix.tokenRate, "token-rate", 20, "POST /v1/oauth/token per second (half the ready grant, half the consent app)")
	fs.Float64Var(&o.mix.toolRate, "tool-rate", 10, "POST /v1/tools/invoke per second")
	fs.Float64Var(&o.mix.turnRate, "turn-rate", 10, "agent turns per second (half park on consent)")
	fs.Float64Var(&o.mix.mcpRate, "mcp-rate", 2, "MCP sessions per second (initialize, tools/list, tools/call, close)")
	fs.IntVar(&o.mix.instances, "instances", 400, "agent instances the turns go to (half complete, half park)")
	fs.IntVar(&o.mix.consentSubjects, "consent-subjects", 100, "subjects of the consent app (consent completed for half)")
	fs.IntVar(&o.mix.principals, "principals", 20, "JWT principals of the REST and MCP calls")
	fs.IntVar(&o.mix.maxInFlight, "max-in-flight", 64, "requests in flight per kind of load; a tick beyond it is dropped and counted")

	fs.Float64Var(&o.limits.cpuSlope, "max-cpu-slope", 20, "flat CPU: at most this many percentage points of a core per hour")
	fs.Float64Var(&o.limits.rssSlope, "max-rss-slope", 64, "flat RSS: at most this many MiB per hour")
	fs.Float64Var(&o.limits.goroutinesSlope, "max-goroutines-slope", 100, "flat goroutines: at most this many per hour (a goroutine left behind by one turn in 360 at 10 turns/s is 100 an hour)")
	fs.Float64Var(&o.limits.heapSlope, "max-heap-slope", 32, "flat heap in use: at most this many MiB per hour")
	fs.Float64Var(&o.limits.fdsSlope, "max-fds-slope", 20, "flat open files: at most this many per hour")
	fs.Float64Var(&o.limits.filesSlope, "max-files-slope", 1000, "flat files under the home: at most this many per hour")
	fs.Float64Var(&o.limits.p50Slope, "max-p50-slope", 100, "flat latency: a route's p50 moves at most this percent of its mean per hour")
	fs.Float64Var(&o.limits.noise, "noise", 2, "a slope is not flat only beyond this many standard errors of its estimate too")
	fs.Float64Var(&o.limits.idleCPU, "idle-cpu", 5, "idle CPU within this many percentage points of a core of the baseline")
	fs.Float64Var(&o.limits.idleRSS, "idle-rss", 48, "idle RSS within this many MiB of the baseline (serve drops its caches and returns the freed memory to the OS after 30 s with no request, --idle-release; the runtime keeps some spans and stacks)")
	fs.IntVar(&o.limits.idleGoroutines, "idle-goroutines", 10, "idle goroutines within this many of the baseline (what the load started ends with it, but serve's pooled keep-alive connections to the upstream, model and provider, 2 goroutines each, stay up to its HTTP clients' idle timeout, and a sweep may be running)")
	fs.Float64Var(&o.limits.idleHeap, "idle-heap", 24, "idle heap in use within this many MiB of the baseline (serve drops its caches and collects after 30 s with no request, --idle-release; what stays is its live state: the bundle, indexes, pools)")
	fs.IntVar(&o.limits.idleFDs, "idle-fds", 10, "idle open files within this many of the baseline")
	fs.Float64Var(&o.limits.errorRate, "max-error-rate", 0.01, "a route whose requests fail more often than this fraction fails the soak")
	return fs
}

// check bounds the flags: every loop of the soak is bounded by them.
func (o options) check() error {
	m := o.mix
	switch {
	case o.duration <= 0 || o.duration > 24*time.Hour:
		return fmt.Errorf("soak: --duration must be in (0, 24h]")
	case o.interval < 100*time.Millisecond || o.interval > 10*time.Minute:
		return fmt.Errorf("soak: --interval must be in [100ms, 10m]")
	case o.baseline < 100*time.Millisecond || o.baseline > 10*time.Minute:
		return fmt.Errorf("soak: --baseline must be in [100ms, 10m]")
	case o.idle < 100*time.Millisecond || o.idle > 30*time.Minute:
		return fmt.Errorf("soak: --idle must be in [100ms, 30m]")
	case o.warmup < 0 || o.warmup >= 1:
		return fmt.Errorf("soak: --warmup must be in [0, 1)")
	case !window(o.sessionRetention) || !window(o.dedupWindow):
		return fmt.Errorf("soak: --session-retention and --dedup-window must be 0 (the server's default) or in [1m, 8760h], as the server accepts")
	case !rate(m.tokenRate) || !rate(m.toolRate) || !rate(m.turnRate) || !rate(m.mcpRate):
		return fmt.Errorf("soak: each rate must be in [0, 1000] per second")
	case m.instances < 2 || m.instances > 10000:
		return fmt.Errorf("soak: --instances must be in [2, 10000]")
	case m.consentSubjects < 2 || m.consentSubjects > 10000:
		return fmt.Errorf("soak: --consent-subjects must be in [2, 10000]")
	case m.principals < 1 || m.principals > 1000:
		return fmt.Errorf("soak: --principals must be in [1, 1000]")
	case m.maxInFlight < 1 || m.maxInFlight > 1024:
		return fmt.Errorf("soak: --max-in-flight must be in [1, 1024]")
	case o.limits.noise < 0 || o.limits.errorRate < 0 || o.limits.errorRate > 1:
		return fmt.Errorf("soak: --noise must be ≥ 0 and --max-error-rate in [0, 1]")
	}
	return nil
}

func rate(r float64) bool { return r >= 0 && r <= 1000 }

func window(d time.Duration) bool { return d == 0 || (d >= time.Minute && d <= 8760*time.Hour) }
