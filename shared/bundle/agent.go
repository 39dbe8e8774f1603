package bundle

import "time"

// Bounds of an Agent's spec.
const (
	maxSystemPrompt        = 256 << 10 // sent with every step
	maxStepsPerTurn        = 1000
	maxToolCallsPerStep    = 128
	maxToolTimeoutSecs     = 900
	defaultToolTimeoutSecs = int(DefaultToolTimeout / time.Second)
)

func decodeAgent(r *res, d *document) {
	spec := r.spec(d, "modelRef", "systemPrompt", "tools", "limits", "changesets")
	if spec == nil {
		return
	}
	a := &Agent{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	var model scalar
	a.ModelRef, model = spec.ref("modelRef", "Model", true)
	if model.OK {
		r.l.crossChecks = append(r.l.crossChecks, func() {
			if _, ok := r.l.b.Models[a.ModelRef.Name]; !ok {
				r.errorf(model.Line, spec.field("modelRef"), "%s", notInBundle(a.ModelRef, r.l.b.Models))
			}
		})
	}
	if s := spec.str("systemPrompt"); s.OK {
		if len(s.Value) > maxSystemPrompt {
			r.errorf(s.Line, spec.field("systemPrompt"), "must be at most %d bytes", maxSystemPrompt)
		} else {
			a.SystemPrompt = s.Value
		}
	}
	a.Tools = toolSelection(r, spec.child("tools", toolSelectionFields...), "agent")

	limits := spec.child("limits", "maxStepsPerTurn", "maxToolCallsPerStep", "toolTimeoutSeconds")
	a.MaxStepsPerTurn = limits.intIn("maxStepsPerTurn", 0, 1, maxStepsPerTurn)
	a.MaxToolCallsPerStep = limits.intIn("maxToolCallsPerStep", DefaultMaxToolCallsPerStep, 1, maxToolCallsPerStep)
	a.ToolTimeout = time.Duration(limits.intIn("toolTimeoutSeconds", defaultToolTimeoutSecs, 1, maxToolTimeoutSecs)) * time.Second
	a.Changesets = agentChangesets(spec)

	keepFirst(r.l.b.Agents, a.Name, a)
}
