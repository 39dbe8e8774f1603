package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
)

// BenchmarkStepOverhead: the engine's own cost per step (store commits on
// the file store, fold, pipeline), with a model and a tool that answer at
// once. Each turn is two steps: a tool call, then the answer.
func BenchmarkStepOverhead(b *testing.B) {
	store, _ := turnfile.New(b.TempDir())
	m := &scriptModel{}
	e := &Engine{Store: store, Config: fixedConfig{Agent{Model: m, SystemPrompt: "be brief"}}, Tools: &fakeTools{}}
	f := &fixture{key: turn.InstanceKey{Swarm: "s", Key: "bench", Agent: "a"}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.mu.Lock()
		m.script = append(m.script, callTools("echo"), say("done"))
		m.mu.Unlock()
		if err := e.Handle(context.Background(), f.event(fmt.Sprint("ev-", i), `{"type":"user.input","text":"go"}`)); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N), "µs/step")
}
