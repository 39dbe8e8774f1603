package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
	"github.com/agentauth/agentauth/shared/turn"
)

// Catalog is the tool plane as the tools page reads it (app builds it
// over the plane's active snapshot and catalog).
type Catalog interface {
	// CatalogTools are the tools of the active revision and the tenant
	// uploads.
	CatalogTools(ctx context.Context) []CatalogTool
	// Explain is what a caller with claims would see of the tools, and
	// why.
	Explain(ctx context.Context, claims map[string]any) toolcatalog.Explanation
	// ExplainSkills is what a caller with claims would see of the skills,
	// and why.
	ExplainSkills(ctx context.Context, claims map[string]any) SkillsExplanation
}

// SkillsExplanation is which skills a caller sees and why: the caller's
// tenant and allow list, read from the claims as the skill routes read
// them, and skills.Index.Explain's answer for them.
type SkillsExplanation struct {
	// AllowListClaim is the claim path of the allow list (skills).
	AllowListClaim string
	Tenant         string
	Allowed        []string
	// Skills are the visible skills and the caller's tenant's hidden
	// ones, by name.
	Skills []skills.Visibility
}

// CatalogTool is one tool as the catalog lists it.
type CatalogTool struct {
	ID, Name, Description, Source string
	// Tenant is the uploading tenant ("" for a bundle tool).
	Tenant string
}

// maxClaims bounds the simulator's claims.
const maxClaims = 8 << 10

type toolsData struct {
	Recent    []recentPrincipal
	Tools     []CatalogTool
	Claims    string
	Problem   string
	Simulated bool
	Policies  []string
	Groups    []groupGrant
	Visible   []visibleTool
	Tenant    string
	// Skills: what the caller sees of them (and its tenant's hidden
	// ones); VisibleSkills counts the visible.
	Skills        []skillRow
	VisibleSkills int
	SkillTenant   string
	SkillsClaim   string
	Allowed       []string
}

// visibleTool is a tool the simulated caller sees and every grant that
// gives it.
type visibleTool struct {
	ID  string
	Via []toolVia
}

// toolVia is one grant: policy → group, through the group's selectors
// (each as the bundle writes it), its explicit tool ids, or both.
type toolVia struct {
	Policy, Group string
	Selectors     []string
	Explicit      bool
}

// skillRow is a skill and why the caller sees it or not.
type skillRow struct {
	Name, Tenant, Description string
	Visible                   bool
	// Reason is skills.Reason's value (global, allowed, not_allowed).
	Reason string
}

type groupGrant struct {
	ID    string
	Tools []string
}

// exampleClaims is the simulator's starting point: claims as an agent
// JWT or a turn's auth carries them.
const exampleClaims = `{
  "sub": "demo:user:alice",
  "tenant_id": "demo",
  "scope": "profile.read"
}`

// tools shows the catalog and the policy simulator: enter claims, see
// which policies match, the groups they grant, the tools each gives and
// the skills the caller sees — each tool and skill with why.
// Platform-wide (the bundle's policies): platform admins only.
func (c *Console) tools(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform || c.cfg.Catalog == nil {
		return "", nil, forbidden
	}
	ctx := r.Context()
	d := toolsData{Tools: c.cfg.Catalog.CatalogTools(ctx), Claims: r.URL.Query().Get("claims"), Recent: c.recentPrincipals(ctx)}
	slices.SortFunc(d.Tools, func(a, b CatalogTool) int { return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ID, b.ID)) })
	if strings.TrimSpace(d.Claims) == "" {
		d.Claims = exampleClaims
		return "tools", view{Title: "Tools", Nav: "tools", Data: d}, nil
	}
	claims, problem := parseClaims(d.Claims)
	if problem != "" {
		d.Problem = problem
		return "tools", view{Title: "Tools", Nav: "tools", Data: d}, nil
	}
	e := c.cfg.Catalog.Explain(ctx, claims)
	d.Simulated, d.Policies, d.Tenant = true, e.Access.PolicyIDs, e.Tenant
	for _, g := range e.Access.GroupIDs {
		gg := groupGrant{ID: g}
		for _, t := range e.Groups[g] {
			gg.Tools = append(gg.Tools, t.ToolID)
		}
		d.Groups = append(d.Groups, gg)
	}
	for _, t := range e.Tools {
		vt := visibleTool{ID: t.ToolID}
		for _, g := range t.Grants {
			v := toolVia{Policy: g.PolicyID, Group: g.GroupID, Explicit: g.Explicit}
			for _, s := range g.Selectors {
				v.Selectors = append(v.Selectors, s.String())
			}
			vt.Via = append(vt.Via, v)
		}
		d.Visible = append(d.Visible, vt)
	}
	se := c.cfg.Catalog.ExplainSkills(ctx, claims)
	d.SkillTenant, d.SkillsClaim, d.Allowed = se.Tenant, se.AllowListClaim, se.Allowed
	for _, s := range se.Skills {
		r := skillRow{Name: s.Name, Tenant: s.TenantID, Description: s.Description, Visible: s.Reason.Visible(), Reason: string(s.Reason)}
		if r.Visible {
			d.VisibleSkills++
		}
		d.Skills = append(d.Skills, r)
	}
	c.cfg.Log.InfoContext(ctx, "console policy simulation", "operator", op.Subject, "policies", len(d.Policies), "tools", len(d.Visible), "skills", d.VisibleSkills)
	return "tools", view{Title: "Tools", Nav: "tools", Data: d}, nil
}

// parseClaims reads the simulator's claims: a JSON object, numbers kept
// as the JWT verifier keeps them.
func parseClaims(s string) (map[string]any, string) {
	if len(s) > maxClaims {
		return nil, "The claims are longer than 8 KiB."
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, "The claims are not a JSON object: " + jsonProblem(err)
	}
	if dec.More() {
		return nil, "The claims are not one JSON object: something follows it."
	}
	return claims, ""
}

func jsonProblem(err error) string {
	var se *json.SyntaxError
	switch {
	case err == nil:
		return "it is null."
	case errors.As(err, &se):
		return se.Error() + " (at byte " + itoa(se.Offset) + ")."
	}
	return err.Error() + "."
}

type bundleData struct {
	Revision  string
	Resources []bundle.Resource
	Git       bool
	History   []changeset.Entry
	Problem   string
}

// bundlePage shows the active revision's resources and, for a git bundle,
// its history (who changed it: agent, instance, turn, changeset).
func (c *Console) bundlePage(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform || c.cfg.Active == nil {
		return "", nil, forbidden
	}
	ctx := r.Context()
	b, err := c.cfg.Active(ctx)
	if err != nil {
		return "", nil, err
	}
	d := bundleData{Revision: b.Revision, Resources: b.Resources(), Git: c.cfg.History != nil}
	if d.Git {
		if d.History, err = changeset.Log(ctx, c.cfg.History, 50); err != nil {
			return "", nil, err
		}
	}
	return "bundle", view{Title: "Bundle", Nav: "bundle", Data: d}, nil
}

type revisionData struct {
	Entry changeset.Entry
	Diff  []diffLine
}

type diffLine struct{ Kind, Text string }

// revision shows one revision of a git bundle and its diff against its
// parent.
func (c *Console) revision(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform || c.cfg.History == nil {
		return "", nil, forbidden
	}
	ctx := r.Context()
	ref, err := changeset.ResolveRef(ctx, c.cfg.History, r.PathValue("ref"))
	if err != nil {
		return "", nil, errNotFound
	}
	e, err := changeset.Show(ctx, c.cfg.History, ref)
	if err != nil {
		return "", nil, errNotFound
	}
	d := revisionData{Entry: e}
	if e.Parent != "" {
		diff, err := changeset.Diff(ctx, c.cfg.History, e.Parent, e.Ref)
		if err != nil {
			return "", nil, err
		}
		for _, l := range bytes.Split([]byte(diff), []byte("\n")) {
			kind := "ctx"
			switch {
			case bytes.HasPrefix(l, []byte("+++")) || bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("diff ")):
				kind = "file"
			case bytes.HasPrefix(l, []byte("+")):
				kind = "add"
			case bytes.HasPrefix(l, []byte("-")):
				kind = "del"
			case bytes.HasPrefix(l, []byte("@@")):
				kind = "hunk"
			}
			d.Diff = append(d.Diff, diffLine{kind, string(l)})
		}
	}
	return "revision", view{Title: "Revision " + shortRef(e.Ref), Nav: "bundle", Data: d}, nil
}

// recentPrincipal is the caller of a recent turn, whose claims the
// simulator can start from.
type recentPrincipal struct {
	Label string
	// Href is the simulator's URL with the claims, query-escaped here
	// (so the template leaves it as it is).
	Href template.URL
}

// recentTurnsRead bounds how many instances the tools page reads for
// recent principals.
const recentTurnsRead = 10

// recentPrincipals are the distinct callers (by their claims) of the
// newest turns of the newest instances: a few reads, bounded.
func (c *Console) recentPrincipals(ctx context.Context) []recentPrincipal {
	if c.cfg.Instances == nil || c.cfg.Turns == nil {
		return nil
	}
	page, err := c.cfg.Instances.QueryInstances(ctx, turn.InstanceQuery{Limit: recentTurnsRead})
	if err != nil {
		c.cfg.Log.WarnContext(ctx, "console: recent principals not read", "err", err)
		return nil
	}
	seen := map[string]bool{}
	var out []recentPrincipal
	for _, in := range page.Instances {
		st, err := c.cfg.Turns.Inspect(ctx, in.Key)
		if err != nil {
			continue
		}
		var newest *turn.Turn
		for _, t := range st.Turns {
			if len(t.Auth.Claims) > 0 && (newest == nil || t.StartedAt.After(newest.StartedAt)) {
				newest = &t
			}
		}
		if newest == nil {
			continue
		}
		b, err := json.MarshalIndent(newest.Auth.Claims, "", "  ")
		if err != nil || seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		sub, _ := newest.Auth.Claims["sub"].(string)
		out = append(out, recentPrincipal{Label: cmp.Or(sub, "(no sub)") + " — " + in.Key.String(), Href: template.URL(Path + "tools?claims=" + url.QueryEscape(string(b)))})
	}
	return out
}
