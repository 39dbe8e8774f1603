package bedrock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// BenchmarkConverseRoundTrip: one Call through the real SDK client (signing
// included) to the scripted model over loopback, with a history of n
// messages (user text, a tool call, its result, an answer per turn).
func BenchmarkConverseRoundTrip(b *testing.B) {
	srv, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{UserContains: "order", Text: "Let me look.", ToolCalls: []scripted.ToolCall{{Name: "acme/orders.lookup", Args: json.RawMessage(`{"id":42}`)}}},
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	client := bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		HTTPClient:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
	})
	m, _ := New(client, Config{ModelID: claude})
	for _, turns := range []int{0, 5, 25} {
		req := model.Request{Tools: []model.ToolSpec{{Name: "acme/orders.lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}},
			Messages: []message.Message{msg("s", message.System, text("You are a helpful support agent. Be brief."))}}
		for i := 0; i < turns; i++ {
			id := fmt.Sprint(i)
			req.Messages = append(req.Messages,
				msg("u"+id, message.User, text("Where is my order "+id+"? It was due yesterday.")),
				msg("a"+id, message.Assistant, use("c"+id, "acme/orders.lookup", `{"id":`+id+`}`)),
				msg("t"+id, message.Tool, res("c"+id, `{"id":`+id+`,"state":"shipped","carrier":"DHL","eta":"2026-01-03"}`, false)),
				msg("b"+id, message.Assistant, text("Order "+id+" has shipped with DHL and arrives on 3 January.")))
		}
		req.Messages = append(req.Messages, msg("last", message.User, text("thanks, and my order?")))
		b.Run(fmt.Sprintf("history=%d", len(req.Messages)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := m.Call(context.Background(), req)
				if err != nil || len(resp.Message.ToolUses()) != 1 {
					b.Fatalf("%v %+v", err, resp)
				}
			}
		})
	}
}
