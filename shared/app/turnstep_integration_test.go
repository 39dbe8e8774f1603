//go:build integration

package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// meteredAPI asks DynamoDB for the capacity of every read and write and
// counts calls and capacity units.
type meteredAPI struct {
	dynamostore.DynamoAPI
	mu       sync.Mutex
	calls    map[string]int
	rcu, wcu float64
	// kindBytes sums the doc bytes written per item kind.
	kindBytes map[string]int
}

func (m *meteredAPI) add(op string, cc []types.ConsumedCapacity, read bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[op]++
	for _, c := range cc {
		if read {
			m.rcu += aws.ToFloat64(c.CapacityUnits)
		} else {
			m.wcu += aws.ToFloat64(c.CapacityUnits)
		}
	}
}

func (m *meteredAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.DynamoAPI.GetItem(ctx, in, o...)
	if err == nil && out.ConsumedCapacity != nil {
		m.add("GetItem", []types.ConsumedCapacity{*out.ConsumedCapacity}, true)
	} else {
		m.add("GetItem", nil, true)
	}
	return out, err
}

func (m *meteredAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.DynamoAPI.BatchGetItem(ctx, in, o...)
	if err == nil {
		m.add("BatchGetItem", out.ConsumedCapacity, true)
	}
	return out, err
}

func (m *meteredAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	m.mu.Lock()
	for _, it := range in.TransactItems {
		if it.Put != nil {
			kind, _ := it.Put.Item["kind"].(*types.AttributeValueMemberS)
			doc, _ := it.Put.Item["doc"].(*types.AttributeValueMemberS)
			if kind != nil && doc != nil {
				m.kindBytes[kind.Value] += len(doc.Value)
			}
		}
	}
	m.mu.Unlock()
	out, err := m.DynamoAPI.TransactWriteItems(ctx, in, o...)
	if err == nil {
		m.add("TransactWriteItems", out.ConsumedCapacity, false)
	}
	return out, err
}

func (m *meteredAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.DynamoAPI.DeleteItem(ctx, in, o...)
	if err == nil && out.ConsumedCapacity != nil {
		m.add("DeleteItem", []types.ConsumedCapacity{*out.ConsumedCapacity}, false)
	}
	return out, err
}

// instantModel calls the tool once per turn, then answers.
type instantModel struct{}

func (instantModel) Call(_ context.Context, req model.Request) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == message.Tool {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: "done"}}},
			Finish: model.FinishStop, Usage: model.Usage{PromptTokens: 200, CompletionTokens: 20, TotalTokens: 220}}, nil
	}
	return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{{Type: message.ToolUse, CallID: "c1", Name: "lookup", Input: json.RawMessage(`{}`)}}},
		Finish: model.FinishToolUse, Usage: model.Usage{PromptTokens: 180, CompletionTokens: 10, TotalTokens: 190}}, nil
}

type instantTools struct{}

func (instantTools) Catalog(context.Context, turn.Turn) ([]engine.Tool, error) {
	return []engine.Tool{{Spec: model.ToolSpec{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)}, Idempotent: true}}, nil
}

func (instantTools) Invoke(context.Context, engine.Invocation) engine.Outcome {
	return engine.Outcome{Kind: engine.OutcomeOK, Result: json.RawMessage(`{"status":"ok","output":{"answer":42}}`)}
}

type instantAgent struct{}

func (instantAgent) Agent(context.Context, turn.InstanceKey) (engine.Agent, string, error) {
	return engine.Agent{Model: instantModel{}, SystemPrompt: "be brief", MaxSteps: 8}, "rev-1", nil
}

// BenchmarkTurnStepDynamoDB is a step's overhead on the DynamoDB turn
// store on the emulator, without model or tool time (both answer at
// once): Load, the commits of a step, the engine's pipeline. Each turn
// (one b.Loop iteration) is two steps — a tool call, then the answer — of
// one instance, as in the deployed turn function. It reports the step's
// p50 and p99, DynamoDB calls per step and the capacity units DynamoDB
// says it consumed.
func BenchmarkTurnStepDynamoDB(b *testing.B) {
	cfg := emulatortest.Config(b)
	api := dynamodb.NewFromConfig(cfg)
	table := emulatortest.DynamoTable(b, api, "agentauth-bench-", dynamostore.TableSchema, nil)
	m := &meteredAPI{DynamoAPI: api, calls: map[string]int{}, kindBytes: map[string]int{}}
	s, err := dynamostore.New(m, table)
	if err != nil {
		b.Fatal(err)
	}
	e := &engine.Engine{Store: s.Turns(nil), Config: instantAgent{}, Tools: instantTools{}}
	ctx := context.Background()
	ev := func(i int) domain.Event {
		return domain.Event{ID: fmt.Sprint("ev-", i), SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "s"}, InstanceKey: "bench", AgentName: "a",
			Input: `{"type":"user.input","text":"go"}`}
	}
	// Warm: the instance exists and has history, as a live one does.
	for i := range 5 {
		if err := e.Handle(ctx, ev(-1-i)); err != nil {
			b.Fatal(err)
		}
	}
	m.mu.Lock()
	m.calls, m.rcu, m.wcu, m.kindBytes = map[string]int{}, 0, 0, map[string]int{}
	m.mu.Unlock()
	var turns []time.Duration
	i := 0
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := e.Handle(ctx, ev(i)); err != nil {
			b.Fatal(err)
		}
		turns = append(turns, time.Since(start))
		i++
	}
	b.StopTimer()
	steps := float64(2 * len(turns))
	sort.Slice(turns, func(x, y int) bool { return turns[x] < turns[y] })
	p := func(q float64) float64 {
		return float64(turns[min(len(turns)-1, int(q*float64(len(turns))))].Microseconds()) / 2 / 1000
	}
	total := 0
	for _, n := range m.calls {
		total += n
	}
	b.ReportMetric(p(0.5), "ms/step-p50")
	b.ReportMetric(p(0.99), "ms/step-p99")
	b.ReportMetric(float64(total)/steps, "ddbcalls/step")
	b.ReportMetric(m.rcu/steps, "RCU/step")
	b.ReportMetric(m.wcu/steps, "WCU/step")
	b.Logf("%d turns (%d steps): calls %v; %.1f RCU, %.1f WCU; doc bytes written by kind %v", len(turns), int(steps), m.calls, m.rcu, m.wcu, m.kindBytes)
}

func TestInstanceDocComposition(t *testing.T) {
	cfg := emulatortest.Config(t)
	api := dynamodb.NewFromConfig(cfg)
	table := emulatortest.DynamoTable(t, api, "agentauth-bench-", dynamostore.TableSchema, nil)
	s, _ := dynamostore.New(api, table)
	e := &engine.Engine{Store: s.Turns(nil), Config: instantAgent{}, Tools: instantTools{}}
	ctx := context.Background()
	for i := range 60 {
		ev := domain.Event{ID: fmt.Sprintf("in:msg-%d@0123456789ab", i), SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "s"}, InstanceKey: "bench", AgentName: "a",
			Input: `{"type":"user.input","text":"go"}`, Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}, Claims: map[string]any{"sub": "alice", "scope": "profile.read"}}}
		if err := e.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := e.Store.Load(ctx, turn.InstanceKey{Swarm: "s", Key: "bench", Agent: "a"})
	size := func(v any) int { b, _ := json.Marshal(v); return len(b) }
	var one turn.Turn
	for _, tn := range st.Turns {
		one = tn
		break
	}
	t.Logf("turns %d (%d B, one %d B: %s), calls %d (%d B), processed %d (%d B), backlog %d B",
		len(st.Turns), size(st.Turns), size(one), func() string { b, _ := json.Marshal(one); return string(b) }(), len(st.Calls), size(st.Calls), len(st.Processed), size(st.Processed), size(st.Backlog))
}
