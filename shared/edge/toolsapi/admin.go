package toolsapi

import (
	"errors"
	"net/http"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// admin lets through the admins who may manage the route's tenant
// (domain.Principal.MayManageTenant): a platform admin (the explicit
// agentauth:platform-admin scope) any tenant, an agentauth:admin only the
// tenant its token names. An admin token that names no tenant, or a null
// one, manages none: platform-wide power is never the absence of a claim.
func (a *API) admin(kind string, h func(http.ResponseWriter, *http.Request, domain.Principal, string, string)) func(http.ResponseWriter, *http.Request, domain.Principal) {
	return func(w http.ResponseWriter, r *http.Request, p domain.Principal) {
		tenant := r.PathValue("tenant")
		if !p.MayManageTenant(tenant) {
			httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, adminRefusal(p, a.paths.Tenant))
			return
		}
		if !domain.ValidTenantID(tenant) {
			httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "the tenant in the path must be 1-64 of letters, digits, _ . - starting with a letter or digit")
			return
		}
		h(w, r, p, tenant, kind)
	}
}

// adminRefusal says why p may not manage the route's tenant.
func adminRefusal(p domain.Principal, tenantClaim string) string {
	switch {
	case !p.Admin:
		return "tenant uploads need the " + jwtauth.ScopeAdmin + " scope"
	case p.Tenant == "":
		return "an admin token must name its tenant (claim " + tenantClaim + "); managing every tenant needs the " + jwtauth.ScopePlatformAdmin + " scope"
	}
	return "a tenant admin may manage only its own tenant's uploads"
}

func (a *API) upload(w http.ResponseWriter, r *http.Request, p domain.Principal, tenant, kind string) {
	// The bytes go to the plane, which validates the spec as the bundle
	// does (unknown fields included); the edge checks type and size, and
	// that it is one JSON value with no duplicate key.
	body, ok := httpx.ReadJSON(w, r, domain.MaxTenantSpecBytes)
	if !ok {
		return
	}
	name, err := a.cfg.Plane.Upload(r.Context(), tenant, kind, body)
	if err != nil {
		a.uploadError(w, r, err)
		return
	}
	a.cfg.Log.InfoContext(r.Context(), "tenant upload stored", "tenant", tenant, "kind", kind, "name", name, "principal", p.Subject)
	httpx.WriteJSON(w, http.StatusCreated, map[string]any{"data": map[string]any{"tenant": tenant, "kind": kind, "name": name}})
}

func (a *API) listUploads(w http.ResponseWriter, r *http.Request, _ domain.Principal, tenant, kind string) {
	ups := a.cfg.Plane.Uploads(r.Context(), tenant, kind)
	out := make([]map[string]any, 0, len(ups))
	for _, u := range ups {
		out = append(out, map[string]any{"name": u.Name, "updatedAt": u.UpdatedAt, "spec": u.Spec})
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (a *API) deleteUpload(w http.ResponseWriter, r *http.Request, p domain.Principal, tenant, kind string) {
	name := r.PathValue("name")
	if err := a.cfg.Plane.Delete(r.Context(), tenant, kind, name); err != nil {
		a.uploadError(w, r, err)
		return
	}
	a.cfg.Log.InfoContext(r.Context(), "tenant upload deleted", "tenant", tenant, "kind", kind, "name", name, "principal", p.Subject)
	w.WriteHeader(http.StatusNoContent)
}

// uploadError maps the plane's upload errors to HTTP.
func (a *API) uploadError(w http.ResponseWriter, r *http.Request, err error) {
	var ve *bundle.ValidationError
	var ce *toolplane.ConflictError
	switch {
	case errors.As(err, &ve):
		problems := make([]map[string]string, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			problems = append(problems, map[string]string{"field": p.Field, "message": p.Message})
		}
		httpx.WriteErrorDetails(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "the upload is not valid", map[string]any{"problems": problems})
	case errors.As(err, &ce):
		httpx.WriteErrorDetails(w, r, http.StatusConflict, "conflict", ce.Error(), map[string]any{"field": ce.Field})
	case errors.Is(err, toolplane.ErrLimit):
		httpx.WriteError(w, r, http.StatusConflict, "limitReached", err.Error())
	case errors.Is(err, domain.ErrInvalidID):
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, err.Error())
	case errors.Is(err, domain.ErrNotFound):
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "this tenant has no upload of that name")
	case errors.Is(err, toolplane.ErrUploadsOff):
		httpx.WriteError(w, r, http.StatusNotImplemented, "uploadsDisabled", "")
	default:
		a.cfg.Log.ErrorContext(r.Context(), "tenant upload failed", "err", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "")
	}
}
