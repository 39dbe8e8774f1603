// Package origin delivers a turn's outcome to where its input came from:
// the turn events a Connector of the bundle asks for (by default the
// final answer, turn.completed, and the consent link of a parked turn,
// turn.parked), each as an HTTPS POST of a JSON Body signed with
// HMAC-SHA256 over timestamp "." body (Sign, Verify).
//
// Which connector: the turn's origin names it, turn.Origin["connector"]
// (OriginKey). A turn whose origin names none delivers nothing; a name the
// bundle does not have is a warning in the log, once per turn, never an
// error of the turn.
//
// A Deliverer is the engine's Notify: it only queues, in memory, and a
// few workers send, so delivery never holds a turn up. A delivery is
// retried with exponential backoff and jitter after a network error, a
// 429 or a 5xx, at most Config.MaxAttempts times, never after another
// answer; every attempt carries the same delivery id (HeaderDelivery, and
// signed, the body's turnId and event.seq: Body.DedupKey).
// So delivery is at least once while the process lives and best effort
// across a restart: what is queued when the process ends is lost, and a
// full queue drops its oldest delivery (a warning). A receiver that must
// not miss an event reads the turn's events from the turn routes by seq.
//
// It sends through the transport it is given (the app gives it the
// upstream guard of http tools, shared/tools/httptool: public addresses
// only, checked after DNS, no proxy from the environment). It must never
// put a Connector's secret in a log line, an error or a body, nor a
// connector's URL beyond its host (a webhook URL's path is often a
// credential of its own).
package origin

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

// OriginKey is the key of turn.Origin that names the Connector a turn's
// events go to.
const OriginKey = "connector"

// Body is the JSON body of a delivery.
type Body struct {
	Connector   string `json:"connector"`
	Swarm       string `json:"swarm"`
	InstanceKey string `json:"instanceKey"`
	Agent       string `json:"agent"`
	TurnID      string `json:"turnId"`
	TraceID     string `json:"traceId"`
	// Event is the turn event as the turn routes show it: turn.completed's
	// data carries the final answer ("final"), turn.parked's the consent
	// link ("authorizationUrl", the provider's page; no secret).
	Event Event `json:"event"`
	// Origin is the turn's origin as its input event posted it.
	Origin map[string]any `json:"origin"`
}

// Event is one turn event in a Body.
type Event struct {
	Type string          `json:"type"`
	Seq  int64           `json:"seq"`
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data,omitempty"`
}

// DeliveryID is the id of the delivery of a turn's event: "<turnId>:<seq>",
// stable across attempts (HeaderDelivery).
func DeliveryID(turnID string, seq int64) string {
	return turnID + ":" + strconv.FormatInt(seq, 10)
}

// DedupKey is the key a receiver deduplicates deliveries on: the
// DeliveryID of the body's TurnID and Event.Seq, which the signature
// covers. HeaderDelivery holds the same value unsigned, and a replayed
// delivery may carry another there.
func (b Body) DedupKey() string { return DeliveryID(b.TurnID, b.Event.Seq) }

// NewBody is the body delivering ev of t to the connector named name.
func NewBody(name string, t turn.Turn, ev turn.TurnEvent) Body {
	return Body{Connector: name, Swarm: t.Instance.Swarm, InstanceKey: t.Instance.Key, Agent: t.Instance.Agent,
		TurnID: t.ID, TraceID: t.TraceID, Event: Event{Type: ev.Type, Seq: ev.Seq, At: ev.At, Data: ev.Data}, Origin: t.Origin}
}
