package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// benchRequest is a step of a conversation with history: a system prompt,
// turns of user text and tool calls with their results, and tools (two of
// them mapped names).
func benchRequest(turns int) model.Request {
	req := model.Request{
		Tools: []model.ToolSpec{
			{Name: "whoami", Description: "Who the user is", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "acme/orders.lookup", Description: "Look an order up", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`)},
			{Name: "acme/refunds.create", Description: "Refund an order", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"reason":{"type":"string"}}}`)},
		},
		Messages: []message.Message{{ID: "s", Role: message.System, Content: []message.Part{{Type: message.Text, Text: "You are a helpful support agent. Be brief."}}}},
	}
	for i := 0; i < turns; i++ {
		id := fmt.Sprint(i)
		req.Messages = append(req.Messages,
			message.Message{ID: "u" + id, Role: message.User, Content: []message.Part{{Type: message.Text, Text: "Where is my order " + id + "? It was due yesterday."}}},
			message.Message{ID: "a" + id, Role: message.Assistant, Content: []message.Part{{Type: message.ToolUse, CallID: "c" + id, Name: "acme/orders.lookup", Input: json.RawMessage(`{"id":` + id + `}`)}}},
			message.Message{ID: "t" + id, Role: message.Tool, Content: []message.Part{{Type: message.ToolResult, CallID: "c" + id, Output: json.RawMessage(`{"id":` + id + `,"state":"shipped","carrier":"DHL","eta":"2026-01-03"}`)}}},
			message.Message{ID: "b" + id, Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: "Order " + id + " has shipped with DHL and arrives on 3 January."}}},
		)
	}
	req.Messages = append(req.Messages, message.Message{ID: "last", Role: message.User, Content: []message.Part{{Type: message.Text, Text: "thanks, and my order?"}}})
	return req
}

// BenchmarkOpenAIRoundTrip: one Call over loopback. "scripted" includes
// the scripted model's own parsing and checks; "canned" answers a fixed
// body, so it is the adapter plus HTTP; "raw-http" posts the same bytes
// and reads the answer without the adapter, so canned − raw-http is what
// the adapter's mapping costs.
func BenchmarkOpenAIRoundTrip(b *testing.B) {
	srv, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{UserContains: "order", Text: "Let me look.", ToolCalls: []scripted.ToolCall{{Name: "acme/orders.lookup", Args: json.RawMessage(`{"id":42}`)}}},
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	scriptedURL, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	names, _ := model.NewNames([]string{"acme/orders.lookup"})
	canned := []byte(`{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"` + names.Wire("acme/orders.lookup") + `","arguments":"{\"id\":42}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":900,"completion_tokens":20,"total_tokens":920}}`)
	cannedSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(canned)
	})}
	cannedURL := startServer(b, cannedSrv)
	defer cannedSrv.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, turns := range []int{0, 5, 25} {
		req := benchRequest(turns)
		for _, target := range []struct{ name, url string }{{"scripted", scriptedURL}, {"canned", cannedURL}} {
			b.Run(fmt.Sprintf("%s/history=%d", target.name, len(req.Messages)), func(b *testing.B) {
				m, err := New(Config{BaseURL: target.url + "/v1", Model: "m", HTTPClient: client})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					resp, err := m.Call(context.Background(), req)
					if err != nil || len(resp.Message.ToolUses()) != 1 {
						b.Fatalf("%v %+v", err, resp)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("raw-http/history=%d", len(req.Messages)), func(b *testing.B) {
			m, _ := New(Config{BaseURL: cannedURL + "/v1", Model: "m"})
			names, _ := model.NamesFor(req)
			body, _ := json.Marshal(m.request(req, names))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(cannedURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

func startServer(b *testing.B, s *http.Server) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	return "http://" + ln.Addr().String()
}
