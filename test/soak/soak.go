package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"
)

// idleStep is the longest time between readings of the idle period.
const idleStep = 5 * time.Second

// jwtMargin is how long the JWTs outlive the soak.
const jwtMargin = time.Hour

// run is the soak: start the stack, take the baseline, load and sample,
// print the slopes, idle and compare, and return a verdictError when the
// server did not hold steady.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseOptions(args)
	if errors.Is(err, errHelp) {
		usage(stdout)
		return nil
	}
	if err != nil {
		return err
	}
	st, err := startStack(ctx, serveSettings{bin: o.bin, sessionRetention: o.sessionRetention, dedupWindow: o.dedupWindow})
	if err != nil {
		return err
	}
	defer func() {
		st.close(!o.keep)
		if o.keep {
			fmt.Fprintf(stdout, "soak: kept %s (home/, bundle/, serve.log)\n", st.work)
		}
	}()
	lat := newLatencies()
	d, err := newDriver(st, o.mix, lat, o.baseline+o.duration+o.idle+jwtMargin)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "soak: agentauth serve (pid %d) on %s, home %s; its /debug/vars and /debug/pprof on %s\n", st.pid(), st.url, st.home, st.debugAddr)
	fmt.Fprintf(stdout, "soak: the agent turns' model is the scripted model — a fixed script, NOT a language model; the OAuth provider is a fake that consents at once; all on 127.0.0.1\n")
	fmt.Fprintf(stdout, "soak: load for %s: %g token reads/s (half the consented grant, half %d consent-app subjects: half consented, half left pending), %g REST tool calls/s, %g turns/s over %d instances (half park on a consent never given, then are terminated and deleted; each followed on its SSE stream), %g MCP sessions/s\n",
		o.duration, o.mix.tokenRate, o.mix.consentSubjects, o.mix.toolRate, o.mix.turnRate, o.mix.instances, o.mix.mcpRate)
	settle, why := levelOff(o.sessionRetention, o.dedupWindow)
	fmt.Fprintf(stdout, "soak: serve runs with %s and %s so that a one-hour run reaches steady state; at the defaults the home levels off after 24 h at about rate × 24 h. Here its files level off after about %s: %s\n",
		windowSetting("AGENTAUTH_SESSION_RETENTION", o.sessionRetention), windowSetting("AGENTAUTH_QUEUE_DEDUP_WINDOW", o.dedupWindow), short(settle), why)
	if err := d.prepare(ctx); err != nil {
		return err
	}

	baseCPU, base, err := measure(ctx, st, o.baseline)
	if err != nil {
		return err
	}
	// Where the goroutines and the heap were before the load: a failure
	// prints what grew since.
	baseProf, err := st.debug.profiles(ctx)
	if err != nil {
		fmt.Fprintf(stdout, "soak: the baseline's profiles: %v\n", err)
	}
	fmt.Fprintf(stdout, "soak: baseline (%s idle before the load): %s\n", o.baseline, resourceLine(baseCPU, base))
	fmt.Fprintf(stdout, "soak: every %s: the server's CPU (%% of one core over the interval), RSS, threads (informational), goroutines and heap in use (its /debug/vars), open fds, files and MiB under its home | per route p50/p99 in ms × requests (!failed)\n", o.interval)

	samples, err := loadAndSample(ctx, st, d, lat, o, stdout)
	if err != nil {
		return err
	}
	from := time.Duration(o.warmup * float64(o.duration))
	files := judgeFiles(o.duration, from, settle)
	if files.gated {
		fmt.Fprintf(stdout, "soak: the files under the home are fitted from %s on, when they have levelled off (%s)\n", short(files.from), short(settle))
	} else {
		fmt.Fprintf(stdout, "soak: the files under the home are NOT judged in this run: they grow by design until about %s (%s), which leaves less than a quarter of the %s run; their slope from the warm-up's end is informational (run SOAK_DURATION=1h to judge them)\n",
			short(settle), why, short(o.duration))
	}
	rising := printSlopes(stdout, samples, from, files, o.limits)
	fails := printTotals(stdout, lat, d, o)

	// The idle period: no load, the soak's idle connections closed.
	d.transport.CloseIdleConnections()
	idle, err := idlePeriod(ctx, st, o.idle)
	if err != nil {
		return err
	}
	rising = append(rising, printIdle(stdout, baseCPU, base, idle, o.limits)...)
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if len(rising) > 0 {
		// Say where: what the goroutines wait in and what holds the heap,
		// against the baseline.
		now, err := st.debug.profiles(ctx)
		if err != nil {
			fmt.Fprintf(stdout, "soak: profiles: %v\n", err)
		}
		printProfiles(stdout, baseProf, now)
	}
	if fails = append(rising, fails...); len(fails) > 0 {
		return verdictError{reasons: fails}
	}
	fmt.Fprintln(stdout, "soak: PASS: every gated slope flat, every idle level back, every route answering")
	return nil
}

// windowSetting says how the soak sets a window variable of the server.
func windowSetting(name string, d time.Duration) string {
	if d == 0 {
		return name + " unset (24h)"
	}
	return name + "=" + short(d)
}

// measure reads the server, waits d, reads it again: the CPU over d and
// the second reading.
func measure(ctx context.Context, st *stack, d time.Duration) (float64, resources, error) {
	a, err := st.read(ctx)
	if err != nil {
		return 0, a, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, a, ctx.Err()
	case <-t.C:
	}
	b, err := st.read(ctx)
	return cpuPercent(a, b), b, err
}

// loadAndSample runs the load for o.duration and prints a sample line
// every o.interval.
func loadAndSample(ctx context.Context, st *stack, d *driver, lat *latencies, o options, stdout io.Writer) ([]sample, error) {
	start := time.Now()
	load, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.run(load, ctx, o.duration)
	}()
	prev, err := st.read(ctx)
	if err != nil {
		stop()
		<-done
		return nil, err
	}
	var samples []sample
	t := time.NewTicker(o.interval)
	defer t.Stop()
	maxSamples := int(o.duration/o.interval) + 1
	for range maxSamples {
		select {
		case <-load.Done():
		case <-t.C:
		}
		if load.Err() != nil {
			break
		}
		if !st.alive() {
			stop()
			<-done
			return samples, fmt.Errorf("the server exited during the load (%v); its log: %s", st.cmd.ProcessState, tail(filepath.Join(st.work, "serve.log")))
		}
		r, err := st.read(ctx)
		if err != nil {
			stop()
			<-done
			return samples, err
		}
		s := sample{at: time.Since(start), cpu: cpuPercent(prev, r), res: r, routes: lat.cut()}
		prev = r
		samples = append(samples, s)
		fmt.Fprintf(stdout, "soak %7s %s |%s\n", s.at.Round(time.Second), resourceLine(s.cpu, r), formatRoutes(s.routes))
	}
	<-done
	fmt.Fprintf(stdout, "soak: load stopped after %s\n", time.Since(start).Round(time.Second))
	return samples, nil
}

// idlePeriod reads the server every idleStep (at most) for d.
func idlePeriod(ctx context.Context, st *stack, d time.Duration) ([]idlePoint, error) {
	step := min(idleStep, d)
	start := time.Now()
	var out []idlePoint
	prev, err := st.read(ctx)
	if err != nil {
		return nil, err
	}
	t := time.NewTicker(step)
	defer t.Stop()
	for range int(d/step) + 1 {
		select {
		case <-ctx.Done():
			return out, nil
		case <-t.C:
		}
		r, err := st.read(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, idlePoint{at: time.Since(start), cpu: cpuPercent(prev, r), res: r})
		prev = r
		if time.Since(start) >= d {
			break
		}
	}
	return out, nil
}

// resourceLine is the resources' part of a sample line.
func resourceLine(cpu float64, r resources) string {
	return fmt.Sprintf("cpu %5.1f%% rss %6.1fMiB threads %3d goroutines %5d heap %6.1fMiB fds %4d home %6d files %7.1fMiB",
		cpu, float64(r.rssKiB)/1024, r.threads, r.goroutines, float64(r.heapInuse)/(1<<20), r.fds, r.files, float64(r.bytes)/(1<<20))
}

// printTotals prints each route's requests over the whole load and the
// dropped ticks, and returns the routes that failed too often or never
// answered.
func printTotals(w io.Writer, lat *latencies, d *driver, o options) []string {
	totals, first := lat.totals()
	var fails []string
	fmt.Fprintf(w, "soak: requests over the load (ok / failed):")
	for _, r := range routes {
		c := totals[r]
		fmt.Fprintf(w, " %s %d/%d", r, c.ok, c.errs)
		if n := c.ok + c.errs; n > 0 && float64(c.errs) > o.limits.errorRate*float64(n) {
			fails = append(fails, fmt.Sprintf("%s: %d of %d requests failed (first: %s)", r, c.errs, n, first[r]))
		}
	}
	fmt.Fprintln(w)
	for _, r := range expectedRoutes(o.mix) {
		if totals[r].ok == 0 {
			fails = append(fails, fmt.Sprintf("%s: no successful request (first error: %s)", r, orNone(first[r])))
		}
	}
	var kinds []string
	for k := range d.dropped {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "soak: ticks dropped (all in flight or every instance busy):")
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, d.dropped[k].Load())
	}
	fmt.Fprintln(w)
	return fails
}

// expectedRoutes are the routes the mix must see answered.
func expectedRoutes(m mix) []string {
	var out []string
	if m.tokenRate > 0 {
		out = append(out, routeTokenReady, routeTokenConsent)
	}
	if m.toolRate > 0 {
		out = append(out, routeInvoke)
	}
	if m.turnRate > 0 {
		out = append(out, routeTurnPost, routeTurnInspect, routeTurnSSE, routeTurnTerminate, routeTurnDelete)
	}
	if m.mcpRate > 0 {
		out = append(out, routeMCPInit, routeMCPList, routeMCPCall, routeMCPClose)
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
