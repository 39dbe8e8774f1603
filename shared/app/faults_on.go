//go:build faultinject

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// ArmFault arms the fault spec names (the value of FaultEnv; "" arms
// none).
func (t *Turns) ArmFault(spec string) error {
	e := t.Engine
	if spec == "" {
		return nil
	}
	point, marker, ok := strings.Cut(spec, ":")
	if !ok || marker == "" {
		return fmt.Errorf("%s: want <point>:<marker file>", FaultEnv)
	}
	fire := func() {
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			return
		}
		if err == nil {
			_ = f.Close()
		}
		fmt.Fprintf(os.Stderr, "fault injection: %s: exiting\n", point)
		os.Exit(3)
	}
	switch point {
	case "exit-after-tool":
		e.Hooks.ToolExecMiddleware = append(e.Hooks.ToolExecMiddleware, func(next engine.ToolCall) engine.ToolCall {
			return func(ctx context.Context, in engine.Invocation) engine.Outcome {
				out := next(ctx, in)
				if out.Kind != engine.OutcomeAuthorizationRequired {
					fire()
				}
				return out
			}
		})
	case "exit-after-model":
		e.Hooks.LLMCallMiddleware = append(e.Hooks.LLMCallMiddleware, func(next engine.LLMCall) engine.LLMCall {
			return func(ctx context.Context, req model.Request) (model.Response, error) {
				resp, err := next(ctx, req)
				if err == nil {
					fire()
				}
				return resp, err
			}
		})
	default:
		return fmt.Errorf("%s: unknown point %q (exit-after-tool, exit-after-model)", FaultEnv, point)
	}
	return nil
}
