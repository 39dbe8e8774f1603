package bundle

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// changesetsYAML is a swarm whose agents may change the bundle: editor
// within tools/**, reader not at all.
const changesetsYAML = `apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: editor}
spec:
  modelRef: local
  changesets:
    allowed:
      files:
        - "tools/**"
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: reader}
spec:
  modelRef: local
  changesets: {enabled: false}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: builders}
spec:
  agents: [editor, reader, helper]
  entrypoint: editor
  policy:
    maxStepsPerTurn: 32
    changesets:
      enabled: true
      allowed:
        files:
          - "tools/**"
          - "prompts/*.yaml"
          - ".agentauth/**"
          - "swarm.yaml"
      emitRevisionChangedEvent: false
`

func changesetFiles() map[string]string {
	f := turnFiles()
	f["changesets.yaml"] = changesetsYAML
	return f
}

func TestParseChangesets(t *testing.T) {
	b := mustParse(t, changesetFiles())
	agents := map[string]AgentChangesets{
		"assistant": {Enabled: true}, // absent: enabled, every file
		"helper":    {Enabled: true},
		"editor":    {Enabled: true, AllowedFiles: []string{"tools/**"}},
		"reader":    {Enabled: false},
	}
	for name, want := range agents {
		if got := b.Agents[name].Changesets; !reflect.DeepEqual(got, want) {
			t.Errorf("Agent/%s changesets = %+v, want %+v", name, got, want)
		}
	}
	swarms := map[string]SwarmChangesets{
		"support": {EmitRevisionChanged: true}, // absent: disabled, every file, emit
		"solo":    {EmitRevisionChanged: true},
		"builders": {Enabled: true, EmitRevisionChanged: false,
			AllowedFiles: []string{"tools/**", "prompts/*.yaml", ".agentauth/**", "swarm.yaml"}},
	}
	for name, want := range swarms {
		if got := b.Swarms[name].Changesets; !reflect.DeepEqual(got, want) {
			t.Errorf("Swarm/%s changesets = %+v, want %+v", name, got, want)
		}
	}
}

// The forms a bundle may write that mean the defaults.
func TestParseChangesetsDefaultForms(t *testing.T) {
	tests := []struct {
		name, agent, swarm string
		wantAgent          AgentChangesets
		wantSwarm          SwarmChangesets
	}{
		{"absent", "", "",
			AgentChangesets{Enabled: true}, SwarmChangesets{EmitRevisionChanged: true}},
		{"null", "  changesets:\n", "    changesets:\n",
			AgentChangesets{Enabled: true}, SwarmChangesets{EmitRevisionChanged: true}},
		{"empty mappings", "  changesets: {}\n", "    changesets: {}\n",
			AgentChangesets{Enabled: true}, SwarmChangesets{EmitRevisionChanged: true}},
		{"empty allowed", "  changesets: {allowed: {}}\n", "    changesets: {allowed: {}}\n",
			AgentChangesets{Enabled: true}, SwarmChangesets{EmitRevisionChanged: true}},
		{"empty file lists", "  changesets: {allowed: {files: []}}\n", "    changesets: {enabled: true, allowed: {files: []}}\n",
			AgentChangesets{Enabled: true}, SwarmChangesets{Enabled: true, EmitRevisionChanged: true}},
		{"null enabled", "  changesets: {enabled: null}\n", "    changesets: {enabled: null, emitRevisionChangedEvent: null}\n",
			AgentChangesets{Enabled: true}, SwarmChangesets{EmitRevisionChanged: true}},
		{"everything written out", "  changesets: {enabled: true, allowed: {files: [a.yaml]}}\n",
			"    changesets: {enabled: false, allowed: {files: [b.yaml]}, emitRevisionChangedEvent: true}\n",
			AgentChangesets{Enabled: true, AllowedFiles: []string{"a.yaml"}},
			SwarmChangesets{AllowedFiles: []string{"b.yaml"}, EmitRevisionChanged: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := turnFiles()
			files["forms.yaml"] = "apiVersion: agents.example.io/v1alpha1\nkind: Agent\nmetadata: {name: a}\nspec:\n  modelRef: local\n" + tt.agent +
				"---\napiVersion: agents.example.io/v1alpha1\nkind: Swarm\nmetadata: {name: s}\nspec:\n  agents: [a]\n  entrypoint: a\n  policy:\n" + tt.swarm
			b := mustParse(t, files)
			if got := b.Agents["a"].Changesets; !reflect.DeepEqual(got, tt.wantAgent) {
				t.Errorf("agent = %+v, want %+v", got, tt.wantAgent)
			}
			if got := b.Swarms["s"].Changesets; !reflect.DeepEqual(got, tt.wantSwarm) {
				t.Errorf("swarm = %+v, want %+v", got, tt.wantSwarm)
			}
		})
	}
}

func TestChangesetPolicyEnabled(t *testing.T) {
	on := &Agent{Changesets: AgentChangesets{Enabled: true}}
	off := &Agent{Changesets: AgentChangesets{Enabled: false}}
	tests := []struct {
		name         string
		swarm, agent bool
		a            *Agent
		want         bool
	}{
		{"swarm on, agent on", true, true, on, true},
		{"swarm on, agent opted out", true, false, off, false},
		{"swarm off, agent on", false, true, on, false},
		{"swarm off, agent off", false, false, off, false},
		{"swarm on, no agent", true, false, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Swarm{Changesets: SwarmChangesets{Enabled: tt.swarm, EmitRevisionChanged: true}}
			p := s.ChangesetPolicy(tt.a)
			if p.Enabled != tt.want {
				t.Errorf("Enabled = %v, want %v", p.Enabled, tt.want)
			}
			if got := p.Allows("tools/a.yaml"); got != tt.want {
				t.Errorf("Allows = %v, want %v (both lists are empty)", got, tt.want)
			}
			if !p.EmitRevisionChanged {
				t.Error("EmitRevisionChanged lost")
			}
		})
	}

	// From a loaded bundle: the defaults allow nothing, the swarm's
	// opt-in everything its lists allow, an agent's opt-out nothing.
	b := mustParse(t, changesetFiles())
	for _, tt := range []struct {
		swarm, agent string
		want         ChangesetPolicy
	}{
		{"support", "assistant", ChangesetPolicy{EmitRevisionChanged: true}},
		{"builders", "editor", ChangesetPolicy{Enabled: true,
			SwarmFiles: []string{"tools/**", "prompts/*.yaml", ".agentauth/**", "swarm.yaml"},
			AgentFiles: []string{"tools/**"}}},
		{"builders", "reader", ChangesetPolicy{
			SwarmFiles: []string{"tools/**", "prompts/*.yaml", ".agentauth/**", "swarm.yaml"}}},
		{"builders", "helper", ChangesetPolicy{Enabled: true,
			SwarmFiles: []string{"tools/**", "prompts/*.yaml", ".agentauth/**", "swarm.yaml"}}},
	} {
		if got := b.Swarms[tt.swarm].ChangesetPolicy(b.Agents[tt.agent]); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Swarm/%s ChangesetPolicy(Agent/%s) = %+v, want %+v", tt.swarm, tt.agent, got, tt.want)
		}
	}

	var nilSwarm *Swarm
	if got := nilSwarm.ChangesetPolicy(on); !reflect.DeepEqual(got, ChangesetPolicy{}) {
		t.Errorf("nil swarm: %+v", got)
	}
}

// The policy is a copy: changing its lists leaves the bundle alone.
func TestChangesetPolicyCopies(t *testing.T) {
	b := mustParse(t, changesetFiles())
	p := b.Swarms["builders"].ChangesetPolicy(b.Agents["editor"])
	p.SwarmFiles[0], p.AgentFiles[0] = "**", "**"
	if b.Swarms["builders"].Changesets.AllowedFiles[0] != "tools/**" || b.Agents["editor"].Changesets.AllowedFiles[0] != "tools/**" {
		t.Error("the policy shares its lists with the bundle")
	}
}

func TestChangesetPolicyAllows(t *testing.T) {
	tests := []struct {
		name         string
		swarm, agent []string
		path         string
		want         bool
	}{
		{"both lists empty: every file", nil, nil, "any/where/x.yaml", true},
		{"both lists empty: a dot file", nil, nil, ".env", true},
		{"empty swarm list, agent allows", nil, []string{"tools/**"}, "tools/a.yaml", true},
		{"empty swarm list, agent refuses", nil, []string{"tools/**"}, "prompts/a.yaml", false},
		{"empty agent list, swarm allows", []string{"tools/**"}, nil, "tools/a.yaml", true},
		{"empty agent list, swarm refuses", []string{"tools/**"}, nil, "swarm.yaml", false},
		{"both allow", []string{"tools/**"}, []string{"tools/*.yaml"}, "tools/a.yaml", true},
		{"swarm allows, agent refuses", []string{"tools/**"}, []string{"tools/*.yaml"}, "tools/sub/a.yaml", false},
		{"agent allows, swarm refuses", []string{"prompts/*.yaml"}, []string{"**"}, "tools/a.yaml", false},
		{"one of several globs", []string{"prompts/*.yaml", "tools/**"}, nil, "tools/a.yaml", true},

		{"** crosses directories", []string{"tools/**"}, nil, "tools/a/b/c.yaml", true},
		{"** at the start", []string{"**/*.yaml"}, nil, "a/b/c.yaml", true},
		{"** matches zero directories", []string{"**/*.yaml"}, nil, "c.yaml", true},
		{"** between segments matches zero", []string{"a/**/b.yaml"}, nil, "a/b.yaml", true},
		{"** is anchored at the root", []string{"tools/**"}, nil, "x/tools/a.yaml", false},
		{"** does not extend a name", []string{"tools/**"}, nil, "toolsx/a.yaml", false},
		{"* within a segment", []string{"prompts/*.yaml"}, nil, "prompts/a.yaml", true},
		{"* does not cross /", []string{"prompts/*.yaml"}, nil, "prompts/a/b.yaml", false},
		{"* at the root does not cross /", []string{"*"}, nil, "a/b", false},
		{"? is one character", []string{"a?.yaml"}, nil, "ab.yaml", true},
		{"? does not match /", []string{"a?b"}, nil, "a/b", false},
		{"alternatives", []string{"{tools,prompts}/*.yaml"}, nil, "prompts/a.yaml", true},
		{"character class", []string{"v[0-9].yaml"}, nil, "v2.yaml", true},

		{"* matches a dot file", []string{"*"}, nil, ".env", true},
		{"* matches a dot file in a directory", []string{"tools/*"}, nil, "tools/.hidden.yaml", true},
		{"** crosses a dot directory", []string{"**/*.yaml"}, nil, ".agentauth/x/a.yaml", true},
		{"a dot directory by name", []string{".agentauth/**"}, nil, ".agentauth/a.yaml", true},

		{"exact path", []string{"swarm.yaml"}, nil, "swarm.yaml", true},
		{"exact path is whole", []string{"swarm.yaml"}, nil, "x/swarm.yaml", false},
		{"exact path is not a prefix", []string{"swarm.yaml"}, nil, "swarm.yaml.bak", false},
		{"exact path is case-sensitive", []string{"swarm.yaml"}, nil, "Swarm.yaml", false},

		{"an empty path", nil, nil, "", false},
		{"an absolute path", nil, nil, "/tools/a.yaml", false},
		{"a .. segment", []string{"tools/**"}, nil, "tools/../swarm.yaml", false},
		{"a leading ./", nil, nil, "./tools/a.yaml", false},
		{"an empty segment", nil, nil, "tools//a.yaml", false},
		{"a trailing /", nil, nil, "tools/", false},
		{"the root", nil, nil, ".", false},
		{"a backslash", nil, nil, `tools\a.yaml`, false},
		{"a malformed glob matches nothing", []string{"tools/[a-"}, nil, "tools/a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ChangesetPolicy{Enabled: true, SwarmFiles: tt.swarm, AgentFiles: tt.agent}
			if got := p.Allows(tt.path); got != tt.want {
				t.Errorf("Allows(%q) with swarm %q, agent %q = %v, want %v", tt.path, tt.swarm, tt.agent, got, tt.want)
			}
			p.Enabled = false
			if p.Allows(tt.path) {
				t.Errorf("Allows(%q) with changesets disabled", tt.path)
			}
		})
	}
}

func TestChangesetPolicyRefused(t *testing.T) {
	p := ChangesetPolicy{Enabled: true, SwarmFiles: []string{"tools/**", "prompts/*.yaml"}, AgentFiles: []string{"tools/**", "prompts/**"}}
	tests := []struct {
		name  string
		p     ChangesetPolicy
		paths []string
		want  []string
	}{
		{"none", p, nil, nil},
		{"all allowed", p, []string{"tools/a.yaml", "prompts/b.yaml"}, nil},
		{"sorted, each once", p, []string{"z.yaml", "tools/a.yaml", "prompts/x/b.yaml", "a.yaml", "z.yaml", "tools/../z.yaml"},
			[]string{"a.yaml", "prompts/x/b.yaml", "tools/../z.yaml", "z.yaml"}},
		{"disabled refuses all", ChangesetPolicy{}, []string{"b", "a"}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.paths)
			if got := tt.p.Refused(in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Refused(%q) = %q, want %q", tt.paths, got, tt.want)
			}
			if !slices.Equal(in, tt.paths) {
				t.Errorf("Refused changed its argument: %q", in)
			}
		})
	}
}

func TestChangesetRules(t *testing.T) {
	const swarmFiles = "        files:\n          - \"tools/**\"\n          - \"prompts/*.yaml\"\n          - \".agentauth/**\"\n          - \"swarm.yaml\"\n"
	// item replaces the swarm's third pattern, on a line of its own.
	item := func(name, pattern, want string) ruleCase {
		return ruleCase{name: name, old: `          - ".agentauth/**"`, new: "          - " + pattern,
			at: "          - " + pattern, want: "Swarm/builders: spec.policy.changesets.allowed.files[2]: " + want}
	}
	runRuleCases(t, changesetFiles, "changesets.yaml", []ruleCase{
		// Swarm patterns.
		item("absolute", `"/tools/**"`, `"/tools/**" must be relative to the bundle root (no leading /)`),
		item("absolute root", `"/"`, `"/" must be relative to the bundle root (no leading /)`),
		item(".. segment", `"tools/../secrets/**"`, `"tools/../secrets/**" must not contain a .. segment: patterns match files inside the bundle`),
		item("leading .. segment", `"../x.yaml"`, `"../x.yaml" must not contain a .. segment`),
		item("only ..", `".."`, `".." must not contain a .. segment`),
		item("trailing .. segment", `"tools/.."`, `"tools/.." must not contain a .. segment`),
		item("backslash", `'tools\**'`, `"tools\\**" must not contain a backslash: paths are slash-separated and escapes are not supported`),
		item("backslash escape", `'tools/\*.yaml'`, `"tools/\\*.yaml" must not contain a backslash`),
		item("empty", `""`, "must not be empty"),
		item(". segment", `"./tools/**"`, `"./tools/**" must not contain a . segment: paths are matched without ./`),
		item("empty segment", `"tools//a.yaml"`, `"tools//a.yaml" must not contain an empty segment (// or a trailing /; for a directory's files write dir/**)`),
		item("trailing slash", `"tools/"`, `"tools/" must not contain an empty segment`),
		item("unclosed class", `"tools/[a-"`, `"tools/[a-" is not a valid glob (an unclosed [ or {, or an empty [])`),
		item("empty class", `"tools/[]"`, `"tools/[]" is not a valid glob`),
		item("unclosed alternatives", `"{tools,prompts/*.yaml"`, `"{tools,prompts/*.yaml" is not a valid glob`),
		item("a number", `3`, "must be a string, got a number"),
		item("null", `null`, "must be a string, got null"),
		item("a mapping", `{a: b}`, "must be a string, got a mapping"),
		item("duplicate", `"tools/**" # again`, `duplicate "tools/**" (also spec.policy.changesets.allowed.files[0])`),
		{name: "swarm files not a list", old: swarmFiles, new: "        files: \"tools/**\"\n",
			at: `files: "tools/**"`, want: "Swarm/builders: spec.policy.changesets.allowed.files: must be a list, got a !!str value"},

		// Swarm fields.
		{name: "swarm changesets unknown field", old: "emitRevisionChangedEvent: false", new: "emitRevisionChanged: false",
			at: "emitRevisionChanged:", want: "Swarm/builders: spec.policy.changesets.emitRevisionChanged: unknown field; did you mean emitRevisionChangedEvent?"},
		{name: "swarm changesets unrelated field", old: "      enabled: true\n", new: "      enabled: true\n      branch: main\n",
			at: "branch: main", want: "Swarm/builders: spec.policy.changesets.branch: unknown field; known fields: enabled, allowed, emitRevisionChangedEvent"},
		{name: "swarm allowed unknown field", old: "      allowed:\n        files:", new: "      allowed:\n        paths: []\n        files:",
			at: "paths: []", want: "Swarm/builders: spec.policy.changesets.allowed.paths: unknown field; known fields: files"},
		{name: "swarm changesets at the spec", old: "  entrypoint: editor\n", new: "  entrypoint: editor\n  changesets: {enabled: true}\n",
			at: "  changesets: {enabled: true}", want: "Swarm/builders: spec.changesets: unknown field; known fields: agents, entrypoint, policy, ingress"},
		{name: "swarm enabled not a boolean", old: "      enabled: true", new: `      enabled: "true"`,
			at: `enabled: "true"`, want: "Swarm/builders: spec.policy.changesets.enabled: must be true or false, got a !!str value"},
		{name: "swarm emit not a boolean", old: "emitRevisionChangedEvent: false", new: "emitRevisionChangedEvent: 0",
			at: "emitRevisionChangedEvent: 0", want: "Swarm/builders: spec.policy.changesets.emitRevisionChangedEvent: must be true or false, got a number"},
		{name: "swarm changesets a boolean", old: "    changesets:\n      enabled: true\n      allowed:\n" + swarmFiles + "      emitRevisionChangedEvent: false\n", new: "    changesets: true\n",
			at: "changesets: true", want: "Swarm/builders: spec.policy.changesets: must be a mapping, got a boolean"},
		{name: "swarm allowed a list", old: "      allowed:\n" + swarmFiles, new: "      allowed: [a]\n",
			at: "allowed: [a]", want: "Swarm/builders: spec.policy.changesets.allowed: must be a mapping, got a list"},

		// Agent.
		{name: "agent pattern invalid", old: "        - \"tools/**\"\n---", new: "        - \"tools/**\"\n        - \"/etc/**\"\n---",
			at: `- "/etc/**"`, want: `Agent/editor: spec.changesets.allowed.files[1]: "/etc/**" must be relative to the bundle root (no leading /)`},
		{name: "agent pattern ..", old: "        - \"tools/**\"\n---", new: "        - \"tools/**/..\"\n---",
			at: `- "tools/**/.."`, want: `Agent/editor: spec.changesets.allowed.files[0]: "tools/**/.." must not contain a .. segment`},
		{name: "agent pattern not a glob", old: "        - \"tools/**\"\n---", new: "        - \"tools/{a\"\n---",
			at: `- "tools/{a"`, want: `Agent/editor: spec.changesets.allowed.files[0]: "tools/{a" is not a valid glob`},
		{name: "agent changesets unknown field", old: "changesets: {enabled: false}", new: "changesets: {enabled: false, emitRevisionChangedEvent: true}",
			at: "changesets: {enabled: false, emit", want: "Agent/reader: spec.changesets.emitRevisionChangedEvent: unknown field; known fields: enabled, allowed"},
		{name: "agent changesets misspelt field", old: "changesets: {enabled: false}", new: "changesets: {enable: false}",
			at: "changesets: {enable:", want: "Agent/reader: spec.changesets.enable: unknown field; did you mean enabled?"},
		{name: "agent allowed unknown field", old: "    allowed:\n      files:\n", new: "    allowed:\n      file: []\n      files:\n",
			at: "file: []", want: "Agent/editor: spec.changesets.allowed.file: unknown field; did you mean files?"},
		{name: "agent changesets misspelt", old: "  changesets: {enabled: false}", new: "  changeset: {enabled: false}",
			at: "changeset:", want: "Agent/reader: spec.changeset: unknown field; did you mean changesets?"},
		{name: "agent enabled not a boolean", old: "changesets: {enabled: false}", new: "changesets: {enabled: no way}",
			at: "changesets: {enabled: no", want: "Agent/reader: spec.changesets.enabled: must be true or false, got a !!str value"},
		{name: "agent changesets a list", old: "changesets: {enabled: false}", new: "changesets: [tools/**]",
			at: "changesets: [", want: "Agent/reader: spec.changesets: must be a mapping, got a list"},
	})
}

// Every bad pattern is reported, once, at its own line, together with the
// others; nothing else is.
func TestChangesetPatternsReportedTogether(t *testing.T) {
	files := changesetFiles()
	changed := mutate(t, files, "changesets.yaml", `          - ".agentauth/**"`,
		"          - \"/abs\"\n          - \"a/../b\"\n          - 'a\\b'\n          - \"\"\n          - \"[x\"\n          - \"./a\"")
	_, err := Parse(toFiles(files), validOptions())
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v", err)
	}
	const field = "changesets.yaml:%d: Swarm/builders: spec.policy.changesets.allowed.files[%d]: "
	want := []string{
		fmt.Sprintf(field, lineOf(t, changed, `"/abs"`), 2) + `"/abs" must be relative to the bundle root (no leading /)`,
		fmt.Sprintf(field, lineOf(t, changed, `"a/../b"`), 3) + `"a/../b" must not contain a .. segment: patterns match files inside the bundle`,
		fmt.Sprintf(field, lineOf(t, changed, `'a\b'`), 4) + `"a\\b" must not contain a backslash: paths are slash-separated and escapes are not supported`,
		fmt.Sprintf(field, lineOf(t, changed, `- ""`), 5) + `must not be empty`,
		fmt.Sprintf(field, lineOf(t, changed, `"[x"`), 6) + `"[x" is not a valid glob (an unclosed [ or {, or an empty [])`,
		fmt.Sprintf(field, lineOf(t, changed, `"./a"`), 7) + `"./a" must not contain a . segment: paths are matched without ./`,
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
