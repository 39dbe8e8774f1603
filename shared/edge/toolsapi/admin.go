package toolsapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// admin lets through callers with the agentauth:admin scope whose tenant
// claim is the route's tenant, or who have no tenant claim (a platform
// admin). A tenant admin never reaches another tenant's uploads.
func (a *API) admin(kind string, h func(http.ResponseWriter, *http.Request, jwtauth.Claims, string, string)) func(http.ResponseWriter, *http.Request, jwtauth.Claims) {
	return func(w http.ResponseWriter, r *http.Request, c jwtauth.Claims) {
		tenant := r.PathValue("tenant")
		if !c.IsAdmin() {
			writeErr(w, 403, "forbidden", "tenant uploads need the agentauth:admin scope", nil)
			return
		}
		if own, has := c.At(a.cfg.TenantClaim); has && own != nil {
			if s, _ := c.StringAt(a.cfg.TenantClaim); s != tenant {
				writeErr(w, 403, "forbidden", "a tenant admin may manage only its own tenant's uploads", nil)
				return
			}
		}
		if !domain.ValidTenantID(tenant) {
			writeErr(w, 400, "invalidRequest", "the tenant in the path must be 1-64 of letters, digits, _ . - starting with a letter or digit", nil)
			return
		}
		h(w, r, c, tenant, kind)
	}
}

func (a *API) upload(w http.ResponseWriter, r *http.Request, c jwtauth.Claims, tenant, kind string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, domain.MaxTenantSpecBytes+1))
	if err != nil {
		writeErr(w, 400, "invalidRequest", "the request body could not be read", nil)
		return
	}
	if len(body) > domain.MaxTenantSpecBytes {
		writeErr(w, 413, "payloadTooLarge", fmt.Sprintf("an upload is at most %d bytes", domain.MaxTenantSpecBytes), nil)
		return
	}
	name, err := a.cfg.Plane.Upload(r.Context(), tenant, kind, body)
	if err != nil {
		a.uploadError(w, r, err)
		return
	}
	a.cfg.Log.InfoContext(r.Context(), "tenant upload stored", "tenant", tenant, "kind", kind, "name", name, "principal", c.Subject())
	writeJSON(w, 201, map[string]any{"data": map[string]any{"tenant": tenant, "kind": kind, "name": name}})
}

func (a *API) listUploads(w http.ResponseWriter, r *http.Request, _ jwtauth.Claims, tenant, kind string) {
	ups := a.cfg.Plane.Uploads(r.Context(), tenant, kind)
	out := make([]map[string]any, 0, len(ups))
	for _, u := range ups {
		out = append(out, map[string]any{"name": u.Name, "updatedAt": u.UpdatedAt, "spec": u.Spec})
	}
	writeJSON(w, 200, map[string]any{"data": out})
}

func (a *API) deleteUpload(w http.ResponseWriter, r *http.Request, c jwtauth.Claims, tenant, kind string) {
	name := r.PathValue("name")
	if err := a.cfg.Plane.Delete(r.Context(), tenant, kind, name); err != nil {
		a.uploadError(w, r, err)
		return
	}
	a.cfg.Log.InfoContext(r.Context(), "tenant upload deleted", "tenant", tenant, "kind", kind, "name", name, "principal", c.Subject())
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) uploadError(w http.ResponseWriter, r *http.Request, err error) {
	var ve *bundle.ValidationError
	var ce *toolplane.ConflictError
	switch {
	case errors.As(err, &ve):
		problems := make([]map[string]string, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			problems = append(problems, map[string]string{"field": p.Field, "message": p.Message})
		}
		writeErr(w, 400, "invalidRequest", "the upload is not valid", map[string]any{"problems": problems})
	case errors.As(err, &ce):
		writeErr(w, 409, "conflict", ce.Error(), map[string]any{"field": ce.Field})
	case errors.Is(err, toolplane.ErrLimit):
		writeErr(w, 409, "limitReached", err.Error(), nil)
	case errors.Is(err, domain.ErrInvalidID):
		writeErr(w, 400, "invalidRequest", err.Error(), nil)
	case errors.Is(err, domain.ErrNotFound):
		writeErr(w, 404, "notFound", "this tenant has no upload of that name", nil)
	case errors.Is(err, toolplane.ErrUploadsOff):
		writeErr(w, 501, "uploadsDisabled", err.Error(), nil)
	default:
		a.cfg.Log.ErrorContext(r.Context(), "tenant upload failed", "err", err)
		writeErr(w, 500, "internal", "the upload could not be stored; see the server log", nil)
	}
}
