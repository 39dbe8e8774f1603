package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultSpec is the default per-(principal, tool) limit when none is
// configured: 60 calls a minute, all 60 at once if need be.
const DefaultSpec = "60/m"

// ParseLimit reads "<calls>/<s|m|h>[:<burst>]": 60/m is a rate of one
// call a second with a burst of 60 (a full minute's calls at once);
// 10/s:2 is ten a second, at most two at once.
func ParseLimit(s string) (Limit, error) {
	spec := strings.TrimSpace(s)
	rate, burstS, hasBurst := strings.Cut(spec, ":")
	nS, unit, ok := strings.Cut(rate, "/")
	n, err := strconv.Atoi(strings.TrimSpace(nS))
	var per float64
	switch strings.TrimSpace(unit) {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	}
	if !ok || err != nil || n < 1 || per == 0 {
		return Limit{}, fmt.Errorf("rate limit %q: want <calls>/<s|m|h>[:<burst>], for example 60/m or 10/s:2", s)
	}
	l := Limit{Rate: float64(n) / per, Burst: n}
	if hasBurst {
		b, err := strconv.Atoi(strings.TrimSpace(burstS))
		if err != nil {
			return Limit{}, fmt.Errorf("rate limit %q: the burst after ':' must be a whole number", s)
		}
		l.Burst = b
	}
	if err := l.Validate(); err != nil {
		return Limit{}, fmt.Errorf("rate limit %q: %w", s, err)
	}
	return l, nil
}

// ParseLimits reads a default limit (DefaultSpec when empty) and a
// comma-separated list of per-tool limits "<tool name>=<limit>".
func ParseLimits(def, perTool string) (Limits, error) {
	if strings.TrimSpace(def) == "" {
		def = DefaultSpec
	}
	d, err := ParseLimit(def)
	if err != nil {
		return Limits{}, err
	}
	ls := Limits{Default: d}
	var errs []error
	for _, item := range strings.Split(perTool, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		tool, spec, ok := strings.Cut(item, "=")
		tool = strings.TrimSpace(tool)
		if !ok || tool == "" {
			errs = append(errs, fmt.Errorf("per-tool limit %q: want <tool name>=<limit>", strings.TrimSpace(item)))
			continue
		}
		l, err := ParseLimit(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", tool, err))
			continue
		}
		if ls.PerTool == nil {
			ls.PerTool = map[string]Limit{}
		}
		if _, dup := ls.PerTool[tool]; dup {
			errs = append(errs, fmt.Errorf("tool %s: limited twice", tool))
		}
		ls.PerTool[tool] = l
	}
	return ls, errors.Join(errs...)
}
