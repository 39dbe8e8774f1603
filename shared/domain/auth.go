package domain

import (
	"fmt"
	"strings"
)

// TurnAuth is the auth context of the turn that asks for a token.
type TurnAuth struct {
	Actor    *Actor    `json:"actor,omitempty"`
	Subjects *Subjects `json:"subjects,omitempty"`
	// Claims are the end user's verified claims, which the trusted
	// runtime that posts the turn's event vouches for (as it vouches for
	// Subjects): a turn's tools are what a caller with these claims may
	// see (TurnAuth.Principal). Never a token; read only.
	Claims map[string]any `json:"claims,omitempty"`
}

// Actor is who caused the turn.
type Actor struct {
	Type    string `json:"type"` // user | service | system
	ID      string `json:"id"`
	Display string `json:"display,omitempty"`
}

// Subjects are the token owners the turn may act for.
type Subjects struct {
	Global string `json:"global,omitempty"`
	User   string `json:"user,omitempty"`
}

// ResumeInfo says which agent instance to wake when a session completes.
type ResumeInfo struct {
	SwarmRef    ObjectRef      `json:"swarmRef"`
	InstanceKey string         `json:"instanceKey"`
	AgentName   string         `json:"agentName"`
	Origin      map[string]any `json:"origin,omitempty"`
	Auth        TurnAuth       `json:"auth"`
	// TurnID, Step and CallID name the tool call that parked on the
	// consent (set by the turn engine): auth.granted carries them back.
	TurnID string `json:"turnId,omitempty"`
	Step   int    `json:"step,omitempty"`
	CallID string `json:"callId,omitempty"`
}

// Target is the agent instance r resumes.
func (r ResumeInfo) Target() ResumeTarget {
	return ResumeTarget{SwarmRef: r.SwarmRef, InstanceKey: r.InstanceKey, AgentName: r.AgentName}
}

// ResumeTarget names one agent instance — swarm, instance key, agent — as
// a session's resume target does: the scope of the auth.pending block and
// of the stores' index of pending sessions. Two targets are one only when
// all four strings are equal: swarms that share an Agent name and an
// instance key are different targets, and never see each other's consent
// links.
type ResumeTarget struct {
	SwarmRef    ObjectRef `json:"swarmRef"`
	InstanceKey string    `json:"instanceKey"`
	AgentName   string    `json:"agentName"`
}

// Validate checks that every part is set: only such a target has its
// pending sessions listed (a session resuming no agent, or an incomplete
// target, is in no target's list). The error wraps ErrInvalidID and names
// the missing parts, never their values.
func (t ResumeTarget) Validate() error {
	var missing []string
	if t.SwarmRef.Kind == "" || t.SwarmRef.Name == "" {
		missing = append(missing, "swarmRef (kind and name)")
	}
	if t.InstanceKey == "" {
		missing = append(missing, "instanceKey")
	}
	if t.AgentName == "" {
		missing = append(missing, "agentName")
	}
	if len(missing) > 0 {
		return fmt.Errorf("resume target: %s missing: %w", strings.Join(missing, ", "), ErrInvalidID)
	}
	return nil
}

// Subject modes.
const (
	SubjectModeGlobal = "global"
	SubjectModeUser   = "user"
)

// Flow names as stored in records.
const (
	FlowAuthorizationCode = "authorization_code"
	FlowDeviceCode        = "device_code"
)
