package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/agentauth/agentauth/shared/turn/message"
)

// Model is one configured language model (a bundle Model resource behind
// an adapter).
type Model interface {
	// Call sends the conversation and the step's tools and returns the
	// model's answer. Errors are *Error.
	Call(ctx context.Context, req Request) (Response, error)
}

// ToolSpec is a tool as the model sees it: the catalog name (adapters map
// it to the provider's alphabet with Names and back), a description and
// the JSON Schema of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Request is one model call.
type Request struct {
	// Messages is the folded conversation, system message first (if any).
	Messages []message.Message
	Tools    []ToolSpec
	// MaxTokens caps the answer (0: the provider's default).
	MaxTokens int
	// Temperature, when set, overrides the provider's default.
	Temperature *float64
}

// FinishReason says why the model stopped.
type FinishReason string

// Finish reasons, mapped from each provider's.
const (
	FinishStop    FinishReason = "stop"     // a final answer
	FinishToolUse FinishReason = "tool_use" // it called tools
	FinishLength  FinishReason = "length"   // cut at MaxTokens
	FinishOther   FinishReason = "other"    // content filter, and the like
)

// Usage is token usage as the runtime model records it.
type Usage struct {
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
	TotalTokens      int64 `json:"totalTokens"`
}

// Add sums usage.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens, u.TotalTokens + o.TotalTokens}
}

// Response is the model's answer: one assistant message (text and
// tool_use parts, tool names already mapped back to catalog names; the
// engine gives it its id), why it stopped, what it cost, and which
// provider model answered.
type Response struct {
	Message message.Message
	Finish  FinishReason
	Usage   Usage
	// ModelID is the provider's model id the adapter called (its
	// configured model, inference profile or ARN; "" when the model
	// does not say).
	ModelID string
}

// Error is a failed call. Message is safe to log and to show: it never
// holds a credential or the request's content.
type Error struct {
	// Status is the provider's HTTP status (0: no answer).
	Status int
	// Code is the provider's error code or type, when it sent one.
	Code    string
	Message string
	// Retryable: 429, 5xx, throttling, a dropped connection — never
	// another 4xx.
	Retryable bool
	// RetryAfter is the provider's hint, when it sent one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := "model: " + e.Message
	if e.Status != 0 {
		s = fmt.Sprintf("model: HTTP %d: %s", e.Status, e.Message)
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// RetryableStatus is the rule for HTTP statuses: 429 and 5xx only (the
// runtime model: never 400, 401, 403 or 404).
func RetryableStatus(status int) bool { return status == 429 || status >= 500 }

// RetryPolicy is how WithRetry retries (the runtime model's defaults:
// 3 retries, 1 s, ×2, at most 30 s).
type RetryPolicy struct {
	MaxRetries   int
	InitialDelay time.Duration
	MaxDelay     time.Duration
}

// DefaultRetryPolicy is the runtime model's.
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 3, InitialDelay: time.Second, MaxDelay: 30 * time.Second}

// WithRetry retries m's retryable errors with exponential backoff and
// jitter (honouring a provider's Retry-After when longer), until the
// policy's retries are spent or ctx ends.
func WithRetry(m Model, p RetryPolicy) Model { return retrying{m: m, p: p, sleep: sleepCtx} }

type retrying struct {
	m     Model
	p     RetryPolicy
	sleep func(context.Context, time.Duration) error
}

func (r retrying) Call(ctx context.Context, req Request) (Response, error) {
	delay := r.p.InitialDelay
	for attempt := 0; ; attempt++ {
		resp, err := r.m.Call(ctx, req)
		var me *Error
		if err == nil || !errors.As(err, &me) || !me.Retryable || attempt >= r.p.MaxRetries {
			return resp, err
		}
		wait := delay/2 + rand.N(delay/2+1) // jitter in [d/2, d]
		if me.RetryAfter > wait {
			wait = me.RetryAfter
		}
		if r.p.MaxDelay > 0 && wait > r.p.MaxDelay {
			wait = r.p.MaxDelay
		}
		if err := r.sleep(ctx, wait); err != nil {
			return Response{}, &Error{Message: "retry abandoned: " + err.Error(), Status: me.Status, Code: me.Code}
		}
		delay *= 2
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
