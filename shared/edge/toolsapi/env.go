package toolsapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// Environment variables of the tools routes, the same for the local server
// and the tools function (the JWT ones are jwtauth's).
const (
	EnvJWKSURL               = jwtauth.EnvJWKSURL
	EnvTenantClaim           = "AGENTAUTH_TENANT_CLAIM"   // default tenant_id
	EnvSkillsClaim           = "AGENTAUTH_SKILLS_CLAIM"   // default skills
	EnvSubjectsClaim         = "AGENTAUTH_SUBJECTS_CLAIM" // default agentauth_subjects
	EnvSeam                  = "AGENTAUTH_TOOLHOOKS_SEAM" // 1: RFC 0064 seam and capability document
	EnvRateLimit             = "AGENTAUTH_TOOL_RATE_LIMIT"
	EnvRateLimits            = "AGENTAUTH_TOOL_RATE_LIMITS" // per tool: name=limit,...
	EnvAllowPrivateUpstreams = "AGENTAUTH_TOOLS_ALLOW_PRIVATE_UPSTREAMS"
	EnvUploadsCheckSeconds   = "AGENTAUTH_UPLOADS_CHECK_SECONDS" // default 10
	EnvMetrics               = "AGENTAUTH_METRICS"               // emf | log | off
)

// Env is the tools routes' configuration from the environment.
type Env struct {
	JWT                                     jwtauth.Config
	TenantClaim, SkillsClaim, SubjectsClaim string
	Seam                                    bool
	Limits                                  ratelimit.Limits
	AllowPrivateUpstreams                   bool
	CheckEvery                              time.Duration
	Metrics                                 string
}

// EnvFromGetenv reads the configuration. enabled is false when
// AGENTAUTH_JWKS_URL is unset: the tools routes are then not served.
// Every problem is reported at once, by variable name, never by value.
func EnvFromGetenv(getenv func(string) string) (env Env, enabled bool, err error) {
	if strings.TrimSpace(getenv(EnvJWKSURL)) == "" {
		return Env{}, false, nil
	}
	var errs []error
	if env.JWT, err = jwtauth.ConfigFromEnv(getenv); err != nil {
		errs = append(errs, err)
	}
	claim := func(name, def string) string {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return def
		}
		if strings.HasPrefix(v, ".") || strings.HasSuffix(v, ".") || strings.Contains(v, "..") {
			errs = append(errs, fmt.Errorf("%s: want a dot path into the claims, like tenant_id or org.id", name))
		}
		return v
	}
	env.TenantClaim = claim(EnvTenantClaim, "tenant_id")
	env.SkillsClaim = claim(EnvSkillsClaim, "skills")
	env.SubjectsClaim = claim(EnvSubjectsClaim, DefaultSubjectsClaim)
	flag := func(name string) bool {
		switch strings.ToLower(strings.TrimSpace(getenv(name))) {
		case "", "0", "false":
			return false
		case "1", "true":
			return true
		}
		errs = append(errs, fmt.Errorf("%s: want 1 or 0", name))
		return false
	}
	env.Seam = flag(EnvSeam)
	env.AllowPrivateUpstreams = flag(EnvAllowPrivateUpstreams)
	if env.Limits, err = ratelimit.ParseLimits(getenv(EnvRateLimit), getenv(EnvRateLimits)); err != nil {
		errs = append(errs, fmt.Errorf("%s / %s: %w", EnvRateLimit, EnvRateLimits, err))
	}
	env.CheckEvery = toolplane.DefaultCheckEvery
	if v := strings.TrimSpace(getenv(EnvUploadsCheckSeconds)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			errs = append(errs, fmt.Errorf("%s: want a whole number of seconds from 1 to 3600", EnvUploadsCheckSeconds))
		}
		env.CheckEvery = time.Duration(n) * time.Second
	}
	switch env.Metrics = strings.TrimSpace(getenv(EnvMetrics)); env.Metrics {
	case "", "log":
		env.Metrics = "log"
	case "emf", "off":
	default:
		errs = append(errs, fmt.Errorf("%s: want emf, log or off", EnvMetrics))
	}
	return env, true, errors.Join(errs...)
}

// FromEnv reads the environment and assembles the API: nil (and no error)
// when AGENTAUTH_JWKS_URL is unset, which turns the tool routes off.
func FromEnv(ctx context.Context, getenv func(string) string, d Deps) (*API, Env, error) {
	env, enabled, err := EnvFromGetenv(getenv)
	if !enabled || err != nil {
		return nil, env, err
	}
	api, err := Assemble(ctx, env, d)
	return api, env, err
}

// Deps are what Assemble needs besides Env.
type Deps struct {
	Bundle *bundle.Bundle
	// Tokens is getAccessToken for http tools with auth.
	Tokens httptool.TokenSource
	// Tenants stores uploads (nil: uploads off).
	Tenants domain.TenantStore
	// Limiter builds the rate limiter for the limits (one that holds
	// across processes: file or DynamoDB).
	Limiter func(ratelimit.Limits) (toolhooks.Limiter, error)
	// Stdout receives EMF metrics.
	Stdout io.Writer
	// Function names the EMF dimension.
	Function string
	Log      *slog.Logger
	// Native tool implementations by tool id (optional).
	Native map[string]toolhooks.Invoker
}

// Assemble builds the tools API from env and deps: the JWT verifier, the
// plane (bundle + stored uploads), the http runner, the hooks with the
// rate limiter and the audit log, and the metrics recorder.
func Assemble(ctx context.Context, env Env, d Deps) (*API, error) {
	v, err := jwtauth.New(env.JWT)
	if err != nil {
		return nil, err
	}
	plane, err := toolplane.New(ctx, toolplane.Config{Bundle: d.Bundle, Tenants: d.Tenants, TenantClaim: env.TenantClaim,
		CheckEvery: env.CheckEvery, AllowPrivateUpstreams: env.AllowPrivateUpstreams, Log: d.Log})
	if err != nil {
		return nil, err
	}
	lim, err := d.Limiter(env.Limits)
	if err != nil {
		return nil, fmt.Errorf("tool rate limiter: %w", err)
	}
	var rec metrics.Recorder = metrics.Nop{}
	switch env.Metrics {
	case "emf":
		rec = &metrics.EMF{W: d.Stdout, Function: d.Function}
	case "log":
		rec = metrics.Log{Logger: d.Log}
	}
	return New(Config{
		Verifier:      v,
		Plane:         plane,
		Runner:        httptool.New(httptool.Options{Tokens: d.Tokens, AllowPrivateUpstreams: env.AllowPrivateUpstreams}),
		Native:        d.Native,
		Hooks:         &toolhooks.Hooks{Limiter: lim, Sink: toolhooks.LogSink{Log: d.Log}, Log: d.Log},
		TenantClaim:   env.TenantClaim,
		SkillsClaim:   env.SkillsClaim,
		SubjectsClaim: env.SubjectsClaim,
		Seam:          env.Seam,
		Metrics:       rec,
		Log:           d.Log,
	})
}
