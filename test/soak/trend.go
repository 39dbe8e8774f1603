package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// sample is one interval of the load.
type sample struct {
	at     time.Duration // since the load started, at the end of the interval
	cpu    float64       // percent of one core over the interval
	res    resources
	routes map[string]routeStats
}

// fit is a least-squares line through a metric's points.
type fit struct {
	n           int
	mean, slope float64 // slope per hour
	se          float64 // standard error of the slope; +Inf under 3 points
}

// leastSquares fits y = a + b·x (x in hours).
func leastSquares(xs, ys []float64) fit {
	n := len(xs)
	f := fit{n: n, se: math.Inf(1)}
	if n == 0 {
		return f
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	f.mean = my
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if n < 2 || sxx == 0 {
		return f
	}
	f.slope = sxy / sxx
	if n < 3 {
		return f
	}
	var rss float64
	for i := range xs {
		r := ys[i] - (my + f.slope*(xs[i]-mx))
		rss += r * r
	}
	f.se = math.Sqrt(rss / float64(n-2) / sxx)
	return f
}

// metric is one series the summary fits.
type metric struct {
	name  string
	limit float64 // allowed |slope| per hour; a percent of the mean when relative
	rel   bool
	gated bool // informational otherwise
	xs    []float64
	ys    []float64
}

// judged is a metric's fit and verdict.
type judged struct {
	metric
	fit
	bound   float64 // the limit in the metric's unit per hour
	noise   float64 // noise × se
	verdict string
	failed  bool
}

// judge fits m and says whether it is flat: a slope within its bound,
// or within noise standard errors of zero (a slope the samples cannot
// tell from none), or falling. Only a rise fails: a leak rises, and a
// falling level after the warm-up is the server settling.
func judge(m metric, noise float64) judged {
	j := judged{metric: m, fit: leastSquares(m.xs, m.ys)}
	j.bound = m.limit
	if m.rel {
		j.bound = m.limit / 100 * math.Abs(j.mean)
	}
	j.noise = noise * j.se
	switch {
	case j.n < 3:
		j.verdict = "too few samples to judge"
	case math.Abs(j.slope) <= j.noise:
		j.verdict = "flat (within noise)"
	case m.gated && math.Abs(j.slope) <= j.bound:
		j.verdict = "flat"
	case j.slope < 0:
		j.verdict = "falling"
	case !m.gated:
		j.verdict = "rising (informational)"
	default:
		j.verdict = "RISING: not flat"
		j.failed = true
	}
	return j
}

// filesFit is how the files under the home are judged: they grow by
// design until the retention windows level them off (levelOff), so they
// are fitted from then on, and gated only when the run is long enough to
// see it (see judgeFiles).
type filesFit struct {
	from  time.Duration
	gated bool
}

// judgeFiles fits the files from levelOff, or from the warm-up's end when
// later, and gates them when that leaves at least a quarter of the run;
// a shorter run shows their slope from the warm-up on, informational.
func judgeFiles(duration, warmupEnd, levelOff time.Duration) filesFit {
	from := max(warmupEnd, levelOff)
	if from <= duration*3/4 {
		return filesFit{from: from, gated: true}
	}
	return filesFit{from: warmupEnd}
}

// metrics builds the series of the samples at or after from (the files
// under the home: at or after files.from).
func metrics(samples []sample, from time.Duration, files filesFit, l limits) []metric {
	seriesFrom := func(start time.Duration, name string, limit float64, rel, gated bool, y func(sample) (float64, bool)) metric {
		m := metric{name: name, limit: limit, rel: rel, gated: gated}
		for _, s := range samples {
			if s.at < start {
				continue
			}
			if v, ok := y(s); ok {
				m.xs = append(m.xs, s.at.Hours())
				m.ys = append(m.ys, v)
			}
		}
		return m
	}
	series := func(name string, limit float64, rel, gated bool, y func(sample) (float64, bool)) metric {
		return seriesFrom(from, name, limit, rel, gated, y)
	}
	var kept []sample
	for _, s := range samples {
		if s.at >= files.from {
			kept = append(kept, s)
		}
	}
	always := func(f func(sample) float64) func(sample) (float64, bool) {
		return func(s sample) (float64, bool) { return f(s), true }
	}
	out := []metric{
		series("cpu (% of a core)", l.cpuSlope, false, true, always(func(s sample) float64 { return s.cpu })),
		series("rss (MiB)", l.rssSlope, false, true, always(func(s sample) float64 { return float64(s.res.rssKiB) / 1024 })),
		series("goroutines", l.goroutinesSlope, false, true, always(func(s sample) float64 { return float64(s.res.goroutines) })),
		series("heap in use (MiB)", l.heapSlope, false, true, always(func(s sample) float64 { return float64(s.res.heapInuse) / (1 << 20) })),
		series("threads", math.Inf(1), false, false, always(func(s sample) float64 { return float64(s.res.threads) })),
		series("open files (fds)", l.fdsSlope, false, true, always(func(s sample) float64 { return float64(s.res.fds) })),
		seriesFrom(files.from, "files under home", l.filesSlope, false, files.gated, always(func(s sample) float64 { return float64(s.res.files) })),
		seriesFrom(files.from, "home MiB", math.Inf(1), false, false, always(func(s sample) float64 { return float64(s.res.bytes) / (1 << 20) })),
	}
	var dirs []string
	for _, s := range kept {
		for d := range s.res.dirs {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		out = append(out, seriesFrom(files.from, "  files in "+d, math.Inf(1), false, false, always(func(s sample) float64 { return float64(s.res.dirs[d]) })))
	}
	for _, r := range routes {
		p := func(q func(routeStats) time.Duration) func(sample) (float64, bool) {
			return func(s sample) (float64, bool) {
				st, ok := s.routes[r]
				return float64(q(st)) / float64(time.Millisecond), ok && st.n > 0
			}
		}
		out = append(out,
			series(r+" p50 ms", l.p50Slope, true, true, p(func(s routeStats) time.Duration { return s.p50 })),
			series(r+" p99 ms", math.Inf(1), false, false, p(func(s routeStats) time.Duration { return s.p99 })))
	}
	return out
}

// printSlopes prints each metric's fit and returns the failures.
func printSlopes(w io.Writer, samples []sample, from time.Duration, files filesFit, l limits) []string {
	var fails []string
	n := 0
	for _, s := range samples {
		if s.at >= from {
			n++
		}
	}
	fmt.Fprintf(w, "soak: slopes per hour, least squares over the %d samples from %s on (the warm-up before is left out); flat = slope ≤ limit, or within %g standard errors of 0 (the noise bound), or falling\n",
		n, from.Round(time.Second), l.noise)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  metric\tmean\tslope/h\tlimit/h\tnoise/h\tverdict\t")
	for _, m := range metrics(samples, from, files, l) {
		if len(m.xs) == 0 {
			continue
		}
		j := judge(m, l.noise)
		limit := "-"
		if m.gated {
			limit = fmt.Sprintf("%.4g", j.bound)
			if m.rel {
				limit += fmt.Sprintf(" (%g%%)", m.limit)
			}
		}
		fmt.Fprintf(tw, "  %s\t%.4g\t%+.4g\t%s\t±%.3g\t%s\t\n", m.name, j.mean, j.slope, limit, j.noise, j.verdict)
		if j.failed {
			fails = append(fails, fmt.Sprintf("%s rising (%+.4g/h, limit %.4g/h, noise ±%.3g/h)", strings.TrimSpace(m.name), j.slope, j.bound, j.noise))
		}
	}
	tw.Flush()
	return fails
}

// level is one resource level the idle check compares with the baseline.
type level struct {
	name      string
	tolerance float64 // allowed above the baseline; NaN: informational
	note      string  // why an informational level is not checked
	of        func(cpu float64, r resources) float64
}

func levels(l limits) []level {
	return []level{
		{name: "cpu (% of a core)", tolerance: l.idleCPU, of: func(cpu float64, _ resources) float64 { return cpu }},
		{name: "rss (MiB)", tolerance: l.idleRSS, of: func(_ float64, r resources) float64 { return float64(r.rssKiB) / 1024 }},
		{name: "goroutines", tolerance: float64(l.idleGoroutines), of: func(_ float64, r resources) float64 { return float64(r.goroutines) }},
		{name: "heap in use (MiB)", tolerance: l.idleHeap, of: func(_ float64, r resources) float64 { return float64(r.heapInuse) / (1 << 20) }},
		{name: "open files (fds)", tolerance: float64(l.idleFDs), of: func(_ float64, r resources) float64 { return float64(r.fds) }},
		{name: "threads", tolerance: math.NaN(), note: "the Go runtime keeps the OS threads it started", of: func(_ float64, r resources) float64 { return float64(r.threads) }},
		{name: "files under home", tolerance: math.NaN(), note: "what the load stored; its trend is above", of: func(_ float64, r resources) float64 { return float64(r.files) }},
	}
}

// idlePoint is one reading of the idle period.
type idlePoint struct {
	at  time.Duration // since the load stopped
	cpu float64
	res resources
}

// printIdle compares the idle period's levels with the baseline: a level
// is back when, from some reading on, every reading to the end of the
// idle period is within its tolerance of the baseline.
func printIdle(w io.Writer, baseCPU float64, base resources, idle []idlePoint, l limits) []string {
	var fails []string
	if len(idle) == 0 {
		return []string{"no reading in the idle period"}
	}
	end := idle[len(idle)-1]
	fmt.Fprintf(w, "soak: after %s with no load, the levels vs the pre-load baseline (back = within tolerance from then to the end):\n", end.at.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  level\tbaseline\tidle (end)\ttolerance\tverdict\t")
	for _, lv := range levels(l) {
		b, e := lv.of(baseCPU, base), lv.of(end.cpu, end.res)
		if math.IsNaN(lv.tolerance) {
			fmt.Fprintf(tw, "  %s\t%.4g\t%.4g\t-\tinformational: %s\t\n", lv.name, b, e, lv.note)
			continue
		}
		back := -1
		for i := len(idle) - 1; i >= 0; i-- {
			if lv.of(idle[i].cpu, idle[i].res) > b+lv.tolerance {
				break
			}
			back = i
		}
		verdict := "NOT BACK"
		if back >= 0 {
			verdict = fmt.Sprintf("back after %s", idle[back].at.Round(time.Second))
		} else {
			fails = append(fails, fmt.Sprintf("idle %s %.4g not back within %s (baseline %.4g, tolerance +%g)", lv.name, e, end.at.Round(time.Second), b, lv.tolerance))
		}
		fmt.Fprintf(tw, "  %s\t%.4g\t%.4g\t+%g\t%s\t\n", lv.name, b, e, lv.tolerance, verdict)
	}
	tw.Flush()
	return fails
}

// verdictError is a soak that ran and found a slope that is not flat, an
// idle level that did not come back, or failing requests.
type verdictError struct{ reasons []string }

func (e verdictError) Error() string {
	return "FAIL: " + strings.Join(e.reasons, "; ")
}
