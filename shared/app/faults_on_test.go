//go:build faultinject

package app

import (
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/turn/engine"
)

func TestFaultSpecIsChecked(t *testing.T) {
	for spec, want := range map[string]string{
		"exit-after-tool":          "want <point>:<marker file>",
		"exit-somewhere:/tmp/mark": "unknown point",
	} {
		if err := (&Turns{Engine: &engine.Engine{}}).ArmFault(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
	e := &engine.Engine{}
	if err := (&Turns{Engine: e}).ArmFault("exit-after-tool:" + t.TempDir() + "/m"); err != nil || len(e.Hooks.ToolExecMiddleware) != 1 {
		t.Fatalf("exit-after-tool: %v, %d middleware", err, len(e.Hooks.ToolExecMiddleware))
	}
	if err := (&Turns{Engine: e}).ArmFault(""); err != nil || len(e.Hooks.LLMCallMiddleware) != 0 {
		t.Fatalf("unset: %v", err)
	}
}
