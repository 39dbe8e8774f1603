package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// UploadFile is the File name problems of an upload carry.
const UploadFile = "request body"

// ParseTenantSkill validates a Skill spec a tenant uploads at run time
// (JSON, the fields of a bundle Skill's spec): the same rules as in a
// bundle, with spec.name required, and scope and tenantId fixed to the
// uploading tenant — an upload is always tenant scoped.
func ParseTenantSkill(tenant string, spec []byte) (*Skill, error) {
	m, err := uploadObject(spec)
	if err != nil {
		return nil, err
	}
	var ps []Problem
	if _, ok := m["name"]; !ok {
		ps = append(ps, uploadProblem("name", "required"))
	}
	if v, ok := m["scope"]; ok && v != SkillScopeTenant {
		ps = append(ps, uploadProblem("scope", `an uploaded skill is always scope "tenant"; leave it out`))
	}
	if v, ok := m["tenantId"]; ok && v != tenant {
		ps = append(ps, uploadProblem("tenantId", "must be the tenant of the route; leave it out"))
	}
	if len(ps) > 0 {
		return nil, &ValidationError{Problems: ps}
	}
	m["scope"], m["tenantId"] = SkillScopeTenant, tenant
	b, err := parseUpload("Skill", m)
	if err != nil {
		return nil, err
	}
	for _, s := range b.Skills {
		return s, nil
	}
	return nil, &ValidationError{Problems: []Problem{uploadProblem("", "no skill")}}
}

// ParseTenantTool validates a Tool spec a tenant uploads at run time (JSON,
// the fields of a bundle Tool's spec) by the bundle's rules, but refuses
// auth: an uploaded tool must never make the broker send a bundle app's
// token to a URL the tenant chose.
func ParseTenantTool(spec []byte) (*Tool, error) {
	m, err := uploadObject(spec)
	if err != nil {
		return nil, err
	}
	if _, ok := m["auth"]; ok {
		return nil, &ValidationError{Problems: []Problem{uploadProblem("auth",
			"not allowed on an uploaded tool: it would send an OAuthApp's token to an upstream the tenant chose; define such tools in the bundle")}}
	}
	b, err := parseUpload("Tool", m)
	if err != nil {
		return nil, err
	}
	for _, t := range b.Tools {
		return t, nil
	}
	return nil, &ValidationError{Problems: []Problem{uploadProblem("", "no tool")}}
}

func uploadProblem(field, msg string) Problem {
	return Problem{File: UploadFile, Field: field, Message: msg}
}

// uploadObject decodes an upload's JSON object, numbers kept exact.
func uploadObject(spec []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, &ValidationError{Problems: []Problem{uploadProblem("", "want one JSON object: the resource's spec")}}
	}
	return m, nil
}

// parseUpload runs the bundle loader on a one-resource bundle made of m
// and reports its problems by spec field (JSON has no useful line
// numbers). ValueSources never resolve: an upload has no env or secrets.
func parseUpload(kind string, m map[string]any) (*Bundle, error) {
	doc, err := json.Marshal(map[string]any{
		"apiVersion": APIVersion, "kind": kind, "metadata": map[string]any{"name": "upload"}, "spec": m,
	})
	if err != nil {
		return nil, fmt.Errorf("bundle: upload: %w", err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	b, err := Parse([]File{{Name: UploadFile, Data: doc}}, Options{LookupEnv: noEnv})
	if ve, ok := err.(*ValidationError); ok {
		out := &ValidationError{}
		for _, p := range ve.Problems {
			field, _ := strings.CutPrefix(p.Field, "spec.")
			if p.Field == "spec" {
				field = ""
			}
			out.Problems = append(out.Problems, uploadProblem(field, p.Message))
		}
		return nil, out
	}
	return b, err
}
