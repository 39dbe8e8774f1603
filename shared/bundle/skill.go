package bundle

// maxSkillContent bounds Skill.spec.content, in bytes.
const maxSkillContent = 1 << 20

func decodeSkill(r *res, d *document) {
	spec := r.spec(d, "name", "description", "content", "scope", "tenantId")
	if spec == nil {
		return
	}
	s := &Skill{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line, SkillName: d.Name}
	name := spec.optStr("name", "use metadata.name", noControl)
	if name.OK {
		s.SkillName = name.Value
	}
	if v := spec.requireStr("description", ""); v.OK {
		s.Description = v.Value
	}
	if v := spec.requireStr("content", ""); v.OK {
		if len(v.Value) > maxSkillContent {
			r.errorf(v.Line, spec.field("content"), "must be at most %d bytes", maxSkillContent)
		} else {
			s.Content = v.Value
		}
	}
	scope := spec.oneOf("scope", true, SkillScopeGlobal, SkillScopeTenant)
	tenant := spec.str("tenantId")
	if scope.OK {
		s.Scope = scope.Value
	}
	switch {
	case !scope.OK:
	case scope.Value == SkillScopeTenant && !tenant.Present:
		r.errorf(tenant.Line, spec.field("tenantId"), "required when scope is tenant")
	case scope.Value == SkillScopeGlobal && tenant.Present:
		r.errorf(tenant.Line, spec.field("tenantId"), "only for scope tenant: a global skill is visible to every tenant")
	case !tenant.OK:
	case tenant.Value == "":
		r.errorf(tenant.Line, spec.field("tenantId"), "must not be empty")
	case noSpaces(tenant.Value) != "":
		r.errorf(tenant.Line, spec.field("tenantId"), "%s", noSpaces(tenant.Value))
	default:
		s.TenantID = tenant.Value
	}

	if _, taken := r.l.b.Skills[s.Name]; taken {
		return
	}
	r.l.b.Skills[s.Name] = s
	if s.Scope == "" || s.SkillName == "" || (s.Scope == SkillScopeTenant && s.TenantID == "") {
		return // reported
	}
	line := name.Line
	if !name.Present {
		line = r.line
	}
	for _, other := range r.l.b.Skills {
		if other != s && other.Scope == s.Scope && other.TenantID == s.TenantID && other.SkillName == s.SkillName {
			where := "global"
			if s.Scope == SkillScopeTenant {
				where = "tenant " + s.TenantID
			}
			r.errorf(line, spec.field("name"), "skill name %q is already used in %s by Skill/%s (%s:%d)", s.SkillName, where, other.Name, other.File, other.Line)
			return
		}
	}
}
