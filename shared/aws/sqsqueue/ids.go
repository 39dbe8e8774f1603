package sqsqueue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// MaxIDLength is the longest MessageGroupId or MessageDeduplicationId SQS
// accepts. Both may hold only the ASCII characters '!' through '~'
// (letters, digits and punctuation; no space, no control characters).
const MaxIDLength = 128

// hashMark starts every hashed id. No verbatim id starts with it, so a
// hashed id never equals a verbatim one.
const hashMark = "~"

// Domain separation for the two hashes, so a group id and a deduplication
// id built from the same text differ.
const (
	groupHashDomain = "agentauth/sqs-group/v1\n"
	dedupHashDomain = "agentauth/sqs-dedup/v1\n"
)

// GroupID is the MessageGroupId of e: its agent instance,
// "<swarmRef.kind>/<swarmRef.name>/<instanceKey>/<agentName>".
//
// The instance is used as it is when that string is at most MaxIDLength
// characters from the allowed set, does not start with '~', and no part
// contains '/' (so the string names exactly one instance). Otherwise it is
// hashed:
//
//	"~" + hex(sha256("agentauth/sqs-group/v1\n" + JSON([kind, name, instanceKey, agentName])))
//	    + "~" + the instance string with disallowed characters as '_', cut to fit 128
//
// The mapping is a pure function of the four fields, so one instance always
// lands in one group, whichever process enqueues. Two instances share a
// group only if their hashes collide; the readable tail is for people
// reading the console and carries no meaning.
func GroupID(e domain.Event) string {
	parts := [4]string{e.SwarmRef.Kind, e.SwarmRef.Name, e.InstanceKey, e.AgentName}
	joined := strings.Join(parts[:], "/")
	if validID(joined) && strings.Count(joined, "/") == 3 {
		return joined
	}
	canon, _ := json.Marshal(parts) // an array of strings always encodes
	return hashedID(groupHashDomain, canon, joined)
}

// DeduplicationID is the MessageDeduplicationId of an event with id eventID.
// The id is used as it is when it is 1 to MaxIDLength characters from the
// allowed set and does not start with '~' (the OAuth core's session ids,
// "as-" and 32 hex digits, always are); otherwise it is
//
//	"~" + hex(sha256("agentauth/sqs-dedup/v1\n" + eventID)) + "~" + readable tail
//
// as for GroupID. Equal event ids give equal deduplication ids, and
// different ones differ unless SHA-256 collides.
func DeduplicationID(eventID string) string {
	if validID(eventID) {
		return eventID
	}
	return hashedID(dedupHashDomain, []byte(eventID), eventID)
}

// validID reports whether s can be sent as an SQS group or deduplication
// id verbatim.
func validID(s string) bool {
	if s == "" || len(s) > MaxIDLength || strings.HasPrefix(s, hashMark) {
		return false
	}
	for i := range len(s) {
		if !allowedIDByte(s[i]) {
			return false
		}
	}
	return true
}

func allowedIDByte(c byte) bool { return c >= '!' && c <= '~' }

func hashedID(domain string, data []byte, readable string) string {
	h := sha256.New()
	h.Write([]byte(domain))
	h.Write(data)
	id := hashMark + hex.EncodeToString(h.Sum(nil))
	room := MaxIDLength - len(id) - len(hashMark)
	var tail strings.Builder
	for _, r := range readable {
		if tail.Len() >= room {
			break
		}
		if r < 0x80 && allowedIDByte(byte(r)) {
			tail.WriteRune(r)
		} else {
			tail.WriteByte('_')
		}
	}
	if tail.Len() == 0 {
		return id
	}
	return id + hashMark + tail.String()
}

// EventTypeAttribute is the message attribute that carries EventType.
const EventTypeAttribute = "eventType"

// EventTypeUnknown is the eventType of an event that names no usable type.
const EventTypeUnknown = "unknown"

// maxEventTypeLength bounds the eventType attribute; real types are short
// ("auth.granted").
const maxEventTypeLength = 128

// EventType is the routing type of e, sent as the message attribute
// "eventType": the first non-empty of e.Metadata["eventType"],
// e.Metadata["type"] and the "type" member of e.Input when Input is a JSON
// object. A type longer than 128 characters or with characters outside
// '!'..'~' becomes EventTypeUnknown, as does an event that names none.
func EventType(e domain.Event) string {
	t := e.Metadata["eventType"]
	if t == "" {
		t = e.Metadata["type"]
	}
	if t == "" {
		t = inputType(e.Input)
	}
	if t == "" || len(t) > maxEventTypeLength {
		return EventTypeUnknown
	}
	for i := range len(t) {
		if !allowedIDByte(t[i]) {
			return EventTypeUnknown
		}
	}
	return t
}

func inputType(input string) string {
	s := strings.TrimSpace(input)
	if !strings.HasPrefix(s, "{") {
		return ""
	}
	var v struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return ""
	}
	return v.Type
}
