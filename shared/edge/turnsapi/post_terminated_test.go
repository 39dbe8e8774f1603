package turnsapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
)

// TestPostToATerminatedInstance (issue 18.4): a post the ingress rules
// route to a terminated instance is 409 instanceTerminated — it was 202
// "queued" and then dropped — naming the instance and saying that
// deleting it (the route, the CLI) starts the conversation over on its
// key; nothing is queued. After the delete the same post is accepted.
func TestPostToATerminatedInstance(t *testing.T) {
	for _, tc := range []struct {
		name, key, path, body string
		// the instance to terminate, and what the refusal must say
		instance, says []string
	}{
		{"routed by the entrypoint", "1712345678.000100", postEvents, `{"text":"are you there?",` + alice + `}`,
			[]string{"support", "1712345678.000100", "assistant"},
			[]string{`instance "support/1712345678.000100/assistant" is terminated`, "not queued",
				"DELETE /v1/instances/support/1712345678.000100/assistant",
				"agentauth instances delete --swarm support --instance 1712345678.000100 --agent assistant",
				"starts the conversation over"}},
		{"routed by an ingress rule", "k1", "/v1/instances/support/k1/events", `{"text":"invoice","properties":{"channel":"billing"},` + alice + `}`,
			[]string{"support", "k1", "billing"},
			[]string{`"support/k1/billing"`, "DELETE /v1/instances/support/k1/billing", "--agent billing"}},
		{"a key a shell and a path must escape", "thread 1's", "/v1/instances/support/thread%201's/events", `{"text":"hi",` + alice + `}`,
			[]string{"support", "thread 1's", "assistant"},
			[]string{"DELETE /v1/instances/support/thread%201%27s/assistant", `--instance 'thread 1'\''s' --agent assistant`}},
		{"a key of a dot", ".", "/v1/instances/support/%2E/events", `{"text":"hi",` + alice + `}`,
			[]string{"support", ".", "assistant"},
			[]string{"DELETE /v1/instances/support/%2E/assistant", "--instance . --agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, turntest.Say("hello"), turntest.Say("hello again"))
			want(t, h.do(t, "POST", tc.path, tc.body, nil), 202, "", "")
			h.Deliver(t)
			inst := "/v1/instances/" + tc.instance[0] + "/" + strings.NewReplacer(" ", "%20", "'", "%27", ".", "%2E").Replace(tc.instance[1]) + "/" + tc.instance[2]
			want(t, h.do(t, "POST", inst+"/terminate", "", nil), 200, "", "")

			rec := h.do(t, "POST", tc.path, tc.body, nil)
			want(t, rec, 409, turnsapi.CodeInstanceTerminated, "terminated")
			var b httpx.ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &b)
			for _, s := range tc.says {
				if !strings.Contains(b.Error.Message, s) {
					t.Errorf("the refusal %q does not say %q", b.Error.Message, s)
				}
			}
			if q := h.Queue.Pending(); len(q) != 0 {
				t.Fatalf("refused, yet queued %+v", q)
			}

			want(t, h.do(t, "DELETE", inst, "", nil), 200, "", "")
			want(t, h.do(t, "POST", tc.path, tc.body, nil), 202, "", "")
			if q := h.Queue.Pending(); len(q) != 1 {
				t.Fatalf("after the delete: queued %+v", q)
			}
		})
	}
}
