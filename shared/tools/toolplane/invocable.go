package toolplane

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Tool error codes of a call the plane cannot hand to one implementation.
const (
	// CodeAmbiguous: two tools of the caller's catalog have the name.
	CodeAmbiguous = "E_TOOL_AMBIGUOUS"
	// CodeTransportUnsupported: this process has no implementation of the
	// tool (an mcp tool, a native one nobody registered).
	CodeTransportUnsupported = "E_TOOL_TRANSPORT_UNSUPPORTED"
)

// Invocable is the tool a call names, as the hooks see it, and what runs
// it. ids are the manifest ids of the tools of that name in the caller's
// catalog:
//
//   - none: not in the catalog; the tool has only its name and no
//     implementation, and the hooks refuse the call before anything runs;
//   - two or more (the bundle allows two tools one name): refused as
//     E_TOOL_AMBIGUOUS under the union of their scopes (fail closed)
//     rather than guessed between;
//   - one: the tool with its scopes, limit and schema, run by impl(id,
//     entry); impl answering nil (this process does not run it) ends in
//     E_TOOL_TRANSPORT_UNSUPPORTED.
//
// An id the snapshot does not hold (an upload deleted meanwhile) counts as
// not in the catalog.
func (s *Snapshot) Invocable(name string, ids []string, impl func(id string, e Entry) toolhooks.Invoker) (toolhooks.Tool, toolhooks.Invoker) {
	var found []string
	for _, id := range ids {
		if _, ok := s.Tools[id]; ok {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return toolhooks.Tool{Name: name}, nil
	case 1:
	default:
		t := toolhooks.Tool{Name: name, Transport: s.Tools[found[0]].Tool.Transport}
		for _, id := range found {
			t.RequiredScopes = append(t.RequiredScopes, s.Tools[id].Tool.RequiredScopes...)
		}
		return t, func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, toolhooks.NewToolError("AmbiguousTool", CodeAmbiguous,
				fmt.Sprintf("%d tools are named %q in this catalog (%s): the deployment must rename one", len(found), name, strings.Join(found, ", ")))
		}
	}
	id, e := found[0], s.Tools[found[0]]
	bt := e.Tool
	t := toolhooks.Tool{Name: name, RequiredScopes: bt.RequiredScopes, Transport: bt.Transport, ErrorMessageLimit: bt.ErrorMessageLimit, Schema: bt.Schema}
	if run := impl(id, e); run != nil {
		return t, run
	}
	return t, func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, toolhooks.NewToolError("TransportUnsupported", CodeTransportUnsupported,
			fmt.Sprintf("tool %s (transport %s) is not run by this server", id, bt.Transport))
	}
}
