// Package bundleapi serves a git bundle's history to operators, behind
// the runtime routes' caller auth: the revisions (the record of every
// changeset), one revision with what it changed, the diff between two,
// and a revert — what `agentauth bundle log|show|diff|revert` do on the
// repository, over HTTP (docs/changesets.md).
package bundleapi

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// Config wires the routes.
type Config struct {
	Manager *changeset.Manager
	Caller  httpapi.CallerAuth
}

// API is the bundle routes.
type API struct{ cfg Config }

// New checks cfg.
func New(cfg Config) (*API, error) {
	if cfg.Manager == nil || cfg.Caller == nil {
		return nil, errors.New("bundleapi: a changeset manager and caller auth are required")
	}
	return &API{cfg: cfg}, nil
}

// maxLog bounds one listing.
const maxLog = 200

func (a *API) routes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /v1/bundle/revisions":       a.log,
		"GET /v1/bundle/revisions/{ref}": a.show,
		"GET /v1/bundle/diff":            a.diff,
		"POST /v1/bundle/revert":         a.revert,
	}
}

// Register mounts the routes on mux behind the caller auth.
func (a *API) Register(mux *http.ServeMux) {
	for pattern, h := range a.routes() {
		mux.Handle(pattern, httpapi.RequireCaller(a.cfg.Caller, h))
	}
}

// Patterns are the routes' ServeMux patterns.
func (a *API) Patterns() []string { return slices.Sorted(maps.Keys(a.routes())) }

func (a *API) resolve(ctx context.Context, w http.ResponseWriter, r *http.Request, field, ref string) (string, bool) {
	got, err := changeset.ResolveRef(ctx, a.cfg.Manager.Repo, ref)
	if err != nil {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, field+": "+err.Error())
		return "", false
	}
	return got, true
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, changeset.ErrUnknownRevision) {
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, err.Error())
		return
	}
	httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "the bundle's history could not be read")
}

// log lists revisions from the active one back: ?limit=N (1–200, 20).
func (a *API) log(w http.ResponseWriter, r *http.Request) {
	n := 20
	if s := r.URL.Query().Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxLog {
			httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "limit: want a number from 1 to 200")
			return
		}
		n = v
	}
	entries, err := changeset.Log(r.Context(), a.cfg.Manager.Repo, n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"revisions": entries})
}

// show is one revision ({ref}: git:<sha>, a sha, active, active~N).
func (a *API) show(w http.ResponseWriter, r *http.Request) {
	ref, ok := a.resolve(r.Context(), w, r, "ref", r.PathValue("ref"))
	if !ok {
		return
	}
	e, err := changeset.Show(r.Context(), a.cfg.Manager.Repo, ref)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, e)
}

// diff is the unified diff ?from=REV&to=REV (to: active), as text/x-diff.
func (a *API) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("from") == "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "from: name a revision (git:<sha>, active~1, …)")
		return
	}
	to := q.Get("to")
	if to == "" {
		to = "active"
	}
	from, ok := a.resolve(r.Context(), w, r, "from", q.Get("from"))
	if !ok {
		return
	}
	if to, ok = a.resolve(r.Context(), w, r, "to", to); !ok {
		return
	}
	d, err := changeset.Diff(r.Context(), a.cfg.Manager.Repo, from, to)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(d))
}

type revertRequest struct {
	Ref      string `json:"ref"`
	Operator string `json:"operator"`
}

// revert lands a revision undoing {ref}: 200 with the result when it
// landed, 409 with it on a conflict, 422 when the bundle would not load.
func (a *API) revert(w http.ResponseWriter, r *http.Request) {
	var req revertRequest
	if !httpx.DecodeJSON(w, r, httpx.DefaultMaxBody, &req) {
		return
	}
	if strings.TrimSpace(req.Operator) == "" || len(req.Operator) > 200 {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "operator: name who reverts (recorded in the commit), at most 200 bytes")
		return
	}
	ref, ok := a.resolve(r.Context(), w, r, "ref", req.Ref)
	if !ok {
		return
	}
	res, err := a.cfg.Manager.Revert(r.Context(), ref, req.Operator)
	if err != nil {
		if errors.Is(err, changeset.ErrUnknownRevision) {
			a.fail(w, r, err)
			return
		}
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, err.Error())
		return
	}
	status := http.StatusOK
	switch res.Status {
	case changeset.StatusConflict:
		status = http.StatusConflict
	case changeset.StatusRejected:
		status = http.StatusUnprocessableEntity
	case changeset.StatusFailed:
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, res)
}
