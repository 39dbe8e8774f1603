package turnsapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// TestPostRefusesWhatOnlyAgentauthQueues: an event posted on the route
// may not carry a type the engine or the OAuth core queue themselves
// (resuming a parked call, a hand-over, a delegation and its result —
// which would have the engine queue an answer to any agent the origin
// names), nor the origin keys of a delegation, nor a name that is not
// UTF-8 (stored, it would be listed with U+FFFD and could not be
// addressed again). Each is a 400 naming the field, and nothing is
// queued.
func TestPostRefusesWhatOnlyAgentauthQueues(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, mentions string
	}{
		{"type auth.granted", "", `{"type":"` + engine.EventAuthGranted + `","text":"x",` + alice + `}`, `"type" auth.granted`},
		{"type auth.expired", "", `{"type":"` + engine.EventAuthExpired + `",` + alice + `}`, `"type" auth.expired`},
		{"type auth.revoked", "", `{"type":"` + engine.EventAuthRevoked + `",` + alice + `}`, `"type" auth.revoked`},
		{"type turn.continue", "", `{"type":"` + engine.EventContinuation + `",` + alice + `}`, `"type" turn.continue`},
		{"type agent.delegate", "", `{"type":"` + engine.EventDelegate + `","text":"do it",` + alice + `}`, `"type" agent.delegate`},
		{"type agent.delegationResult", "", `{"type":"` + engine.EventDelegationResult + `","text":"done",` + alice + `}`, `"type" agent.delegationResult`},
		{"origin.delegatedFrom", "", `{"text":"hi","origin":{"connector":"cli","delegatedFrom":"billing"},` + alice + `}`, `"origin.delegatedFrom"`},
		{"origin.delegationTurnId", "", `{"text":"hi","origin":{"delegationTurnId":"turn-1"},` + alice + `}`, `"origin.delegationTurnId"`},
		{"origin.delegationEventId", "", `{"text":"hi","origin":{"delegationEventId":"delegate:turn-1:c1"},` + alice + `}`, `"origin.delegationEventId"`},
		{"a delegation in full", "", `{"type":"agent.delegate","text":"x","agent":"billing","origin":{"delegatedFrom":"assistant"},` + alice + `}`, `agent.delegate`},
		{"an instance key that is not UTF-8", "/v1/instances/support/k%FFk/events", `{"text":"hi",` + alice + `}`, "instanceKey is not valid UTF-8"},
		{"an instance key with a lone surrogate's bytes", "/v1/instances/support/k%ED%A0%80/events", `{"text":"hi",` + alice + `}`, "instanceKey is not valid UTF-8"},
		{"a swarm that is not UTF-8", "/v1/instances/supp%C3ort/k1/events", `{"text":"hi",` + alice + `}`, "swarm is not valid UTF-8"},
		// JSON decoding turns invalid bytes into U+FFFD, which names no
		// agent of the swarm.
		{"an agent that is not UTF-8", "", "{\"text\":\"hi\",\"agent\":\"bill\xffing\"," + alice + "}", "agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			path := tc.path
			if path == "" {
				path = postEvents
			}
			rec := h.do(t, "POST", path, tc.body, nil)
			want(t, rec, 400, httpx.CodeInvalidRequest, tc.mentions)
			if q := h.Queue.Pending(); len(q) != 0 {
				t.Fatalf("refused, yet queued %+v", q)
			}
		})
	}
}

// TestPostKeepsTheDocumentedTypes: what docs/turns.md documents as
// posted still is — a user's message (the default type), a system.wakeup
// an ingress rule may match, an async tool's completion, a connector's
// own type — with an origin of the caller's own keys, and a key that is
// UTF-8 beyond ASCII.
func TestPostKeepsTheDocumentedTypes(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, wantType, wantKey string
	}{
		{"a user's message", "", `{"text":"who am I?","origin":{"connector":"cli","channel":"C1"},` + alice + `}`, engine.EventUserInput, "1712345678.000100"},
		{"user.input named", "", `{"type":"user.input","text":"hi",` + alice + `}`, engine.EventUserInput, "1712345678.000100"},
		{"system.wakeup", "", `{"type":"system.wakeup",` + alice + `}`, engine.EventWakeup, "1712345678.000100"},
		{"tool.completion", "", `{"type":"tool.completion","text":"{\"handle\":\"h-1\"}",` + alice + `}`, "tool.completion", "1712345678.000100"},
		{"a connector's type", "", `{"type":"slack.reaction","text":"+1",` + alice + `}`, "slack.reaction", "1712345678.000100"},
		{"a key in UTF-8 beyond ASCII", "/v1/instances/support/%EC%8A%A4%EB%A0%88%EB%93%9C-1%E2%80%A6/events", `{"text":"hi",` + alice + `}`, engine.EventUserInput, "스레드-1…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			path := tc.path
			if path == "" {
				path = postEvents
			}
			rec := h.do(t, "POST", path, tc.body, nil)
			want(t, rec, 202, "", "")
			q := h.Queue.Pending()
			if len(q) != 1 {
				t.Fatalf("queued %d events", len(q))
			}
			var in struct{ Type string }
			_ = json.Unmarshal([]byte(q[0].Input), &in)
			if in.Type != tc.wantType || q[0].InstanceKey != tc.wantKey {
				t.Fatalf("queued type %q key %q, want %q %q", in.Type, q[0].InstanceKey, tc.wantType, tc.wantKey)
			}
		})
	}
}

// TestPostRefusalHoldsNoBody: a refusal names the field, never echoes
// what was posted in it.
func TestPostRefusalHoldsNoBody(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, "POST", postEvents, `{"text":"`+textCanary+`","origin":{"delegatedFrom":"`+textCanary+`"},`+alice+`}`, nil)
	want(t, rec, 400, httpx.CodeInvalidRequest, "origin.delegatedFrom")
	if strings.Contains(rec.Body.String(), textCanary) || strings.Contains(rec.Body.String(), subjectCanary) {
		t.Fatalf("the refusal echoes the body: %s", rec.Body)
	}
}
