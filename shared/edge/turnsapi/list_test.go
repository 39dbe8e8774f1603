package turnsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// lifecycleOnly is the engine's lifecycle as the routes use it; nothing
// is posted in these tests.
type lifecycleOnly struct{ *engine.Engine }

func (lifecycleOnly) Post(context.Context, string, string, turn.Incoming) (domain.Event, error) {
	return domain.Event{}, errors.New("not posted here")
}

// TestListWithAnUnreadableInstance: one instance whose journal holds a
// line that does not decode no longer turns GET /v1/instances into a 500
// for everyone (issue 16): the others are listed and that one is named,
// by its key and the store's id, with a reason that shows none of the
// stored content.
func TestListWithAnUnreadableInstance(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := turnfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	good := turn.InstanceKey{Swarm: "support", Key: "thread-good", Agent: "assistant"}
	bad := turn.InstanceKey{Swarm: "support", Key: "thread-bad", Agent: "assistant"}
	for _, k := range []turn.InstanceKey{good, bad} {
		if err := store.Commit(ctx, turnstoretest.First(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Break bad's journal: find its directory by the key file.
	entries, _ := os.ReadDir(dir)
	broken := ""
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), "key.json")); err == nil && strings.Contains(string(b), "thread-bad") {
			broken = e.Name()
			f, err := os.OpenFile(filepath.Join(dir, e.Name(), "journal.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString(`{"v":2,"c":"` + textCanary + "\n")
			f.Close()
		}
	}
	if broken == "" {
		t.Fatal("no directory of the instance to break")
	}
	api, err := turnsapi.New(turnsapi.Config{Turns: lifecycleOnly{&engine.Engine{Store: store}}, Caller: httpapi.BearerToken{Token: domain.NewSecret(token)}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{h: api.Handler()}
	var list struct {
		Data       []struct{ Swarm, InstanceKey, Agent, Status string }
		Unreadable []struct{ Swarm, InstanceKey, Agent, ID, Reason string }
	}
	rec := h.do(t, "GET", "/v1/instances", "", &list)
	want(t, rec, 200, "", "")
	if len(list.Data) != 1 || list.Data[0].InstanceKey != good.Key || list.Data[0].Status != "active" {
		t.Fatalf("data %+v, want %s only", list.Data, good)
	}
	if len(list.Unreadable) != 1 {
		t.Fatalf("unreadable %+v, want %s", list.Unreadable, bad)
	}
	u := list.Unreadable[0]
	if u.Swarm != bad.Swarm || u.InstanceKey != bad.Key || u.Agent != bad.Agent || u.ID != broken || !strings.Contains(u.Reason, "journal") {
		t.Fatalf("unreadable %+v, want %s in %s and a reason naming the journal", u, bad, broken)
	}
	if body := rec.Body.String(); strings.Contains(body, textCanary) || strings.Contains(body, dir) {
		t.Fatalf("the answer shows stored content or a path: %s", body)
	}
	// The operator deletes it; with none unreadable, unreadable is an
	// empty array, not absent.
	want(t, h.do(t, "DELETE", "/v1/instances/support/thread-bad/assistant", "", nil), 200, "", "")
	var raw map[string]json.RawMessage
	want(t, h.do(t, "GET", "/v1/instances", "", &raw), 200, "", "")
	if string(raw["unreadable"]) != "[]" {
		t.Fatalf("unreadable %s, want []", raw["unreadable"])
	}
}
