// Package scripted is the scripted model: an HTTP server that speaks the
// two wire formats the model adapters use — OpenAI chat completions
// (POST /v1/chat/completions) and Bedrock Converse (POST
// /model/{modelId}/converse) — and answers every request from a script.
//
// It is not a language model. It understands nothing it is sent: it checks
// a request the way the providers do (roles, tool-call pairing, tool-name
// alphabet), finds the first turn of its script whose conditions hold (the
// last user message contains a string; the request ends with a result of a
// given tool) and replies with that turn's text or tool calls, the same
// way for the same request every time. Tests use it to see what an adapter
// sent (Requests, or GET /debug/requests from another process) and to make
// it fail (FailNext); `make run` uses it, with DemoScript, as the demo's
// stand-in for a model; the end-to-end tests drive agents changing their
// own bundle with SelfChangeScript.
//
// It must never be presented as a model, and never log a request's content
// or headers (an adapter sends its API key to it like to any provider);
// /debug/requests, its test hook, shows no header and answers loopback
// callers only.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Script is what the scripted model answers: the first Turn whose
// conditions hold answers a request.
type Script struct {
	Turns []Turn
}

// Turn is one scripted answer and when it applies. A turn with ToolResult
// set answers a request that ends with tool results, one of them from that
// tool; any other turn answers a request that ends with a user message
// whose text contains UserContains.
//
// Text and the strings of ToolCalls' arguments may hold placeholders:
// "{{result.KEY}}", the value of KEY in the matched tool result (the
// shallowest, then the first in key order); "{{user.KEY}}", VALUE of the
// first word KEY=VALUE in the user's last message; "{{tools}}", the names
// of the tools the request offered, comma-separated. Each is "" when it
// has no value, or DEFAULT when written "{{result.KEY|DEFAULT}}" or
// "{{user.KEY|DEFAULT}}".
type Turn struct {
	// UserContains, when set, must be in the user's last message's text:
	// the message the request ends with, or, with ToolResult, the last
	// one the user sent before the tool calls.
	UserContains string
	// ToolResult names a tool (its catalog name or its wire name) whose
	// result the request ends with.
	ToolResult string
	// ResultHas, with ToolResult, is a key that result must hold (at any
	// depth).
	ResultHas string

	// Text is the answer's text, its placeholders filled.
	Text string
	// ToolCalls are the tools the answer calls, in order.
	ToolCalls []ToolCall
	// Finish overrides the finish reason (default: tool_use with tool
	// calls, stop without).
	Finish model.FinishReason
	// Usage overrides the token counts (default: a quarter of the request
	// and answer sizes in bytes).
	Usage *model.Usage
}

// ToolCall is a scripted tool call: the tool's catalog or wire name (the
// scripted model answers with the wire name the request offered; a name
// no offered tool has is sent as is, like a model making one up) and its
// JSON arguments ({} when empty). A placeholder inside a string of the
// arguments is filled as in Text, escaped for the string: a script carries
// an id from one tool's result, or a word of the user's message, to the
// next call.
type ToolCall struct {
	Name string
	Args json.RawMessage
}

// Failure makes the next requests fail before the script is consulted.
type Failure struct {
	// Status is the HTTP status to answer with.
	Status int
	// Times is how many requests fail (default 1).
	Times int
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter string
	// Code is the OpenAI error code / Converse error type (default: from
	// the status, e.g. rate_limit_exceeded / ThrottlingException for 429).
	Code string
	// Message is the error's message (default: a generic one). Tests put
	// request content here to check an adapter does not pass it on.
	Message string
}

// Request is what the scripted model received, as the wire had it and as
// the provider-neutral messages it stands for.
type Request struct {
	// Wire is "openai" or "converse".
	Wire string
	// Model is the model id the request named.
	Model  string
	Header http.Header
	Body   []byte
	// Messages: system first (if any), tool results as the wire carries
	// them (role tool for OpenAI, in a user message for Converse); a tool
	// result that is not JSON is kept as a JSON string.
	Messages    []message.Message
	Tools       []model.ToolSpec
	MaxTokens   int
	Temperature *float64
	// Status is what the scripted model answered; Turn the index of the
	// script turn that answered (-1: none); Calls the names of the tools
	// its answer called.
	Status int
	Turn   int
	Calls  []string
}

// maxRecorded bounds what a long-running demo server keeps.
const maxRecorded = 1000

// maxBody bounds a request body.
const maxBody = 8 << 20

// Server is the scripted model as an http.Handler.
type Server struct {
	script Script
	log    *slog.Logger

	mu       sync.Mutex
	requests []Request
	failures []Failure

	srv *http.Server
	url string
}

var wireName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New checks script and returns the scripted model serving it; log may be
// nil.
func New(script Script, log *slog.Logger) (*Server, error) {
	for i, t := range script.Turns {
		if t.ResultHas != "" && t.ToolResult == "" {
			return nil, fmt.Errorf("scripted model: turn %d: resultHas without toolResult", i)
		}
		switch t.Finish {
		case "", model.FinishStop, model.FinishToolUse, model.FinishLength, model.FinishOther:
		default:
			return nil, fmt.Errorf("scripted model: turn %d: unknown finish %q", i, t.Finish)
		}
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("scripted model: turn %d: tool call %d has no name", i, j)
			}
			if len(c.Args) > 0 && !json.Valid(c.Args) {
				return nil, fmt.Errorf("scripted model: turn %d: tool call %d (%s): arguments are not JSON", i, j, c.Name)
			}
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{script: script, log: log}, nil
}

// FailNext queues a failure; queued failures are used in order.
func (s *Server) FailNext(f Failure) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, f)
}

// Requests returns what the scripted model received, oldest first (the
// last 1,000).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Reset forgets the recorded requests and queued failures.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.failures = nil, nil
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= maxRecorded {
		s.requests = append(s.requests[:0], s.requests[1:]...)
	}
	s.requests = append(s.requests, r)
}

func (s *Server) nextFailure() (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) == 0 {
		return Failure{}, false
	}
	f := s.failures[0]
	s.failures[0].Times--
	if s.failures[0].Times == 0 {
		s.failures = s.failures[1:]
	}
	return f, true
}

// wire is one of the two formats: how it reads a request and writes an
// answer or an error.
type wire interface {
	name() string
	parse(r *http.Request, body []byte) (parsed, error)
	answer(w http.ResponseWriter, p parsed, a answer)
	fail(w http.ResponseWriter, status int, code, msg string)
}

// parsed is a request in neutral form.
type parsed struct {
	model       string
	messages    []message.Message
	tools       []model.ToolSpec
	maxTokens   int
	temperature *float64
}

// invalid is a request the provider would refuse (400).
type invalid struct{ msg string }

func (e invalid) Error() string { return e.msg }

func invalidf(format string, a ...any) error { return invalid{fmt.Sprintf(format, a...)} }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var wr wire
	var modelID string
	switch {
	case r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/chat/completions":
		wr = openaiWire{}
	case strings.HasPrefix(r.URL.Path, "/model/") && strings.HasSuffix(r.URL.Path, "/converse"):
		wr = converseWire{}
		modelID = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/model/"), "/converse")
	case r.URL.Path == DebugRequestsPath:
		s.serveSeen(w, r)
		return
	default:
		http.Error(w, "the scripted model answers POST /v1/chat/completions and POST /model/{modelId}/converse", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec := Request{Wire: wr.name(), Model: modelID, Header: r.Header.Clone(), Body: body, Turn: -1}
	status, turn := s.handle(w, r, wr, body, err, &rec)
	rec.Status, rec.Turn = status, turn
	s.record(rec)
	s.log.Info("the scripted model answered", "wire", wr.name(), "status", status, "turn", turn)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, wr wire, body []byte, readErr error, rec *Request) (int, int) {
	if readErr != nil {
		wr.fail(w, http.StatusBadRequest, "", "the request body could not be read")
		return http.StatusBadRequest, -1
	}
	if f, ok := s.nextFailure(); ok {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		msg := f.Message
		if msg == "" {
			msg = "the scripted model was told to fail this request"
		}
		wr.fail(w, f.Status, f.Code, msg)
		return f.Status, -1
	}
	p, err := wr.parse(r, body)
	if err != nil {
		wr.fail(w, http.StatusBadRequest, "", err.Error())
		return http.StatusBadRequest, -1
	}
	if rec.Model == "" {
		rec.Model = p.model
	}
	rec.Messages, rec.Tools, rec.MaxTokens, rec.Temperature = p.messages, p.tools, p.maxTokens, p.temperature
	i, a, ok := s.script.pick(p, body)
	if !ok {
		wr.fail(w, http.StatusBadRequest, "no_scripted_turn", "the scripted model has no turn for this request")
		return http.StatusBadRequest, -1
	}
	for _, c := range a.calls {
		rec.Calls = append(rec.Calls, c.name)
	}
	wr.answer(w, p, a)
	return http.StatusOK, i
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Start serves on addr ("127.0.0.1:0": any free port) in the background
// and returns the base URL (http://host:port); Close stops it.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("scripted model: listen %s: %w", addr, err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	go func() { _ = s.srv.Serve(ln) }()
	s.log.Info("the scripted model is listening (it answers from a script; it is not a language model)", "url", s.url)
	return s.url, nil
}

// URL is the base URL Start returned.
func (s *Server) URL() string { return s.url }

// Close stops a started server.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// Serve runs the scripted model with script on addr until ctx ends.
func Serve(ctx context.Context, addr string, script Script, log *slog.Logger) error {
	s, err := New(script, log)
	if err != nil {
		return err
	}
	if _, err := s.Start(addr); err != nil {
		return err
	}
	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("scripted model: shutdown: %w", err)
	}
	return nil
}
