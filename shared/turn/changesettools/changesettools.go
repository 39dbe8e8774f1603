// Package changesettools are the changeset tools an agent changes its own
// bundle with (tool spec §12.4; docs/changesets.md):
// swarmBundle.openChangeset, the file tools (readFile, writeFile,
// listFiles, deleteFile) and swarmBundle.commitChangeset. They are
// builtins of the turn plane (turntools.Builtin): offered to an agent when
// its swarm and itself enable changesets, run through the tool hooks like
// any tool, and scoped to the instance that calls them (a changeset is its
// owner's alone).
package changesettools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/turntools"
)

// The tools' names, as the model sees them.
const (
	Open   = "swarmBundle.openChangeset"
	Read   = "swarmBundle.readFile"
	Write  = "swarmBundle.writeFile"
	List   = "swarmBundle.listFiles"
	Delete = "swarmBundle.deleteFile"
	Commit = "swarmBundle.commitChangeset"
)

// Tools implements turntools.Builtins over a changeset manager.
type Tools struct {
	Manager *changeset.Manager
	// Bundles gives the bundle at a revision (the step's): its Swarm and
	// Agent say whether the agent may change the bundle and which files.
	Bundles func(ctx context.Context, rev string) (*bundle.Bundle, error)
	Log     *slog.Logger
}

var _ turntools.Builtins = (*Tools)(nil)

type def struct {
	name, description string
	schema            map[string]any
	idempotent        bool
	run               func(ctx context.Context, x *Tools, c changeset.Caller, args json.RawMessage) (any, []engine.Event, error)
}

var (
	idProp   = map[string]any{"type": "string", "description": "the changesetId swarmBundle.openChangeset answered"}
	pathProp = map[string]any{"type": "string", "description": "a path relative to the bundle root, such as tools/search.yaml"}
	defs     = []def{
		{name: Open, idempotent: false,
			description: "Open a changeset on the active bundle revision, to change this agent's own bundle (tools, groups, prompts). Edit files with the swarmBundle file tools, then commit with swarmBundle.commitChangeset; nothing changes until the commit, and the new revision takes effect at your next step.",
			schema:      obj(nil, nil),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, _ json.RawMessage) (any, []engine.Event, error) {
				o, err := x.Manager.Open(ctx, c)
				return o, nil, err
			}},
		{name: Read, idempotent: true,
			description: "Read a file of an open changeset: its edited content, else the revision the changeset is on.",
			schema:      obj(map[string]any{"changesetId": idProp, "path": pathProp}, []string{"changesetId", "path"}),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, raw json.RawMessage) (any, []engine.Event, error) {
				var a struct{ ChangesetID, Path string }
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, nil, err
				}
				data, err := x.Manager.ReadFile(ctx, c, a.ChangesetID, a.Path)
				if err != nil {
					return nil, nil, err
				}
				return map[string]any{"path": a.Path, "content": string(data), "size": len(data)}, nil, nil
			}},
		{name: Write, idempotent: true,
			description: fmt.Sprintf("Write a whole file of an open changeset (created or replaced), at most %d KiB; a .yaml/.yml file must be YAML. Only files the swarm's and this agent's changesets.allowed.files allow.", changeset.MaxFileBytes>>10),
			schema: obj(map[string]any{"changesetId": idProp, "path": pathProp,
				"content": map[string]any{"type": "string", "description": "the file's whole new content"}}, []string{"changesetId", "path", "content"}),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, raw json.RawMessage) (any, []engine.Event, error) {
				var a struct{ ChangesetID, Path, Content string }
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, nil, err
				}
				if err := x.Manager.WriteFile(ctx, c, a.ChangesetID, a.Path, []byte(a.Content)); err != nil {
					return nil, nil, err
				}
				return map[string]any{"changesetId": a.ChangesetID, "path": a.Path, "size": len(a.Content), "written": true}, nil, nil
			}},
		{name: List, idempotent: true,
			description: "List the files of an open changeset (all, or those whose path starts with prefix), marking those it changed.",
			schema: obj(map[string]any{"changesetId": idProp,
				"prefix": map[string]any{"type": "string", "description": "only paths starting with this, such as tools/"}}, []string{"changesetId"}),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, raw json.RawMessage) (any, []engine.Event, error) {
				var a struct{ ChangesetID, Prefix string }
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, nil, err
				}
				files, err := x.Manager.ListFiles(ctx, c, a.ChangesetID, a.Prefix)
				if err != nil {
					return nil, nil, err
				}
				return map[string]any{"files": files}, nil, nil
			}},
		{name: Delete, idempotent: false,
			description: "Delete a file in an open changeset.",
			schema:      obj(map[string]any{"changesetId": idProp, "path": pathProp}, []string{"changesetId", "path"}),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, raw json.RawMessage) (any, []engine.Event, error) {
				var a struct{ ChangesetID, Path string }
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, nil, err
				}
				if err := x.Manager.DeleteFile(ctx, c, a.ChangesetID, a.Path); err != nil {
					return nil, nil, err
				}
				return map[string]any{"changesetId": a.ChangesetID, "path": a.Path, "deleted": true}, nil, nil
			}},
		{name: Commit, idempotent: true,
			description: "Commit an open changeset: it merges the active revision's changes since it was opened, checks the bundle loads, and makes it the active revision from your next step. Answers status ok, rejected (policy or an invalid bundle: nothing changed; fix and commit again), conflict (the same lines changed meanwhile: the files now hold conflict markers; resolve and commit again) or failed.",
			schema: obj(map[string]any{"changesetId": idProp,
				"message": map[string]any{"type": "string", "description": "what the change does, for the history (git log)"}}, []string{"changesetId"}),
			run: func(ctx context.Context, x *Tools, c changeset.Caller, raw json.RawMessage) (any, []engine.Event, error) {
				var a struct{ ChangesetID, Message string }
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, nil, err
				}
				res, err := x.Manager.Commit(ctx, c, a.ChangesetID, a.Message)
				if err != nil {
					var ce *changeset.Error
					if errors.As(err, &ce) {
						return nil, nil, err
					}
					// A store failure: the agent gets status failed, and the
					// event says so.
					x.log().WarnContext(ctx, "changeset commit failed", "changesetId", a.ChangesetID, "turnId", c.TurnID, "traceId", c.TraceID, "err", err)
					res = changeset.Result{Status: changeset.StatusFailed, ChangesetID: a.ChangesetID,
						Error: &changeset.ResultError{Code: "E_CHANGESET_FAILED", Message: "the bundle repository could not be written; nothing changed", Hint: "commit again later"}}
				}
				return res, []engine.Event{commitEvent(c, res)}, nil
			}},
	}
)

// commitEvent is the turn event of a commit's outcome: what an operator
// follows (the instance, turn and trace are the event's own scope).
func commitEvent(c changeset.Caller, r changeset.Result) engine.Event {
	typ := map[string]string{changeset.StatusOK: turn.EvChangesetCommitted, changeset.StatusRejected: turn.EvChangesetRejected,
		changeset.StatusConflict: turn.EvChangesetConflict}[r.Status]
	if typ == "" {
		typ = turn.EvChangesetFailed
	}
	data := map[string]any{"changesetId": r.ChangesetID, "status": r.Status, "baseRef": r.BaseRef,
		"instance": c.Owner.Swarm + "/" + c.Owner.Instance + "/" + c.Owner.Agent, "turnId": c.TurnID, "traceId": c.TraceID}
	if r.NewRef != "" {
		data["newRef"], data["previousRef"] = r.NewRef, r.PreviousRef
	}
	if r.Summary != nil {
		data["summary"] = r.Summary
	}
	if r.Error != nil {
		data["code"] = r.Error.Code
		if len(r.Error.ViolatedFiles) > 0 {
			data["violatedFiles"] = r.Error.ViolatedFiles
		}
		if len(r.Error.ConflictingFiles) > 0 {
			data["conflictingFiles"] = r.Error.ConflictingFiles
		}
	}
	return engine.Event{Type: typ, Data: data}
}

func obj(props map[string]any, required []string) map[string]any {
	if props == nil {
		props = map[string]any{}
	}
	o := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// builtins are the compiled definitions (the schemas are ours: they
// compile).
var builtins = func() []turntools.Builtin {
	out := make([]turntools.Builtin, len(defs))
	for i, d := range defs {
		raw, err := json.Marshal(d.schema)
		if err != nil {
			panic(err)
		}
		var doc map[string]any // the compiler wants JSON's own types
		if err := json.Unmarshal(raw, &doc); err != nil {
			panic(err)
		}
		sch, err := bundle.CompileInputSchema(doc)
		if err != nil {
			panic(fmt.Sprintf("changesettools: %s: %v", d.name, err))
		}
		out[i] = turntools.Builtin{Spec: model.ToolSpec{Name: d.name, Description: d.description, InputSchema: raw}, Schema: sch, Idempotent: d.idempotent}
	}
	return out
}()

// For offers the tools to t's agent when its swarm and itself enable
// changesets at the step's revision, bound to t's instance and turn.
func (x *Tools) For(ctx context.Context, t turn.Turn) ([]turntools.Builtin, error) {
	b, err := x.Bundles(ctx, t.BundleRevision)
	if err != nil {
		return nil, err
	}
	sw, ag := b.Swarms[t.Instance.Swarm], b.Agents[t.Instance.Agent]
	if sw == nil || ag == nil {
		return nil, nil
	}
	policy := sw.ChangesetPolicy(ag)
	if !policy.Enabled {
		return nil, nil
	}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: t.Instance.Swarm, Instance: t.Instance.Key, Agent: t.Instance.Agent},
		TurnID: t.ID, TraceID: t.TraceID, Policy: policy}
	out := make([]turntools.Builtin, len(builtins))
	for i, bt := range builtins {
		d := defs[i]
		bt.Run = func(ctx context.Context, _ turn.Turn, args json.RawMessage) (json.RawMessage, []engine.Event, error) {
			v, evs, err := d.run(ctx, x, c, args)
			if err != nil {
				return nil, evs, toolError(err)
			}
			raw, err := json.Marshal(v)
			return raw, evs, err
		}
		out[i] = bt
	}
	return out, nil
}

// toolError gives a refusal its code for the model.
func toolError(err error) error {
	var ce *changeset.Error
	if errors.As(err, &ce) {
		return toolhooks.NewToolError("ChangesetError", ce.Code, ce.Message)
	}
	return err
}

func (x *Tools) log() *slog.Logger {
	if x.Log != nil {
		return x.Log
	}
	return slog.New(slog.DiscardHandler)
}
