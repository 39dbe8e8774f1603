package domain

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
