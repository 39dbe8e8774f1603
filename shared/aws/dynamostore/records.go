package dynamostore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// leasePK keys a lease by a hash of its key, so no caller-supplied text
// reaches the key or an expression.
func leasePK(leaseKey string) string {
	sum := sha256.Sum256([]byte(leaseKey))
	return leasePrefix + hex.EncodeToString(sum[:])
}

// grantDoc and sessionDoc are the doc attribute: the record's JSON without
// the fields kept as attributes. A field of the outer struct hides the
// embedded field of the same JSON name, and a nil one is omitted.
type grantDoc struct {
	domain.Grant
	Version   *struct{} `json:"version,omitempty"`
	CreatedAt *struct{} `json:"createdAt,omitempty"`
}

type sessionDoc struct {
	domain.Session
	Version     *struct{} `json:"version,omitempty"`
	Status      *struct{} `json:"status,omitempty"`
	CompletedAt *struct{} `json:"completedAt,omitempty"`
}

// grantItem is the item for g as given (version included).
func grantItem(g domain.Grant) (map[string]types.AttributeValue, error) {
	doc, err := json.Marshal(grantDoc{Grant: g})
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	created, err := timeText(g.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("encode createdAt: %w", err)
	}
	item := map[string]types.AttributeValue{
		PartitionKey:  str(grantPrefix + g.ID),
		attrKind:      str(kindGrant),
		attrVersion:   num(g.Version),
		attrCreatedAt: str(created),
		attrDoc:       str(string(doc)),
	}
	maps.Copy(item, grantListAttrs(g))
	return item, nil
}

// decodeGrant reads a grant item. Errors wrap domain.ErrCorrupt.
func decodeGrant(id string, item map[string]types.AttributeValue) (domain.Grant, error) {
	if err := checkKind(item, kindGrant); err != nil {
		return domain.Grant{}, err
	}
	version, err := needN(item, attrVersion)
	if err != nil {
		return domain.Grant{}, err
	}
	created, err := needTime(item, attrCreatedAt)
	if err != nil {
		return domain.Grant{}, err
	}
	doc, err := needS(item, attrDoc)
	if err != nil {
		return domain.Grant{}, err
	}
	var g domain.Grant
	if err := json.Unmarshal([]byte(doc), &g); err != nil {
		return domain.Grant{}, fmt.Errorf("%w: doc: %s", domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	g.ID, g.Version, g.CreatedAt = id, version, created
	return g, nil
}

// grantState is what CompleteSession needs to know of a stored grant.
type grantState struct {
	exists    bool
	version   int64
	createdAt string // attribute text, written back unchanged
}

// grantStateOf reads the state from an item (nil: no grant).
func grantStateOf(item map[string]types.AttributeValue) (grantState, error) {
	if len(item) == 0 {
		return grantState{}, nil
	}
	if err := checkKind(item, kindGrant); err != nil {
		return grantState{}, err
	}
	v, err := needN(item, attrVersion)
	if err != nil {
		return grantState{}, err
	}
	if _, err := needTime(item, attrCreatedAt); err != nil {
		return grantState{}, err
	}
	created, _ := needS(item, attrCreatedAt)
	return grantState{exists: true, version: v, createdAt: created}, nil
}

// sessionItem is the item for s as given (version and status included).
func sessionItem(s domain.Session) (map[string]types.AttributeValue, error) {
	doc, err := json.Marshal(sessionDoc{Session: s})
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	item := map[string]types.AttributeValue{
		PartitionKey: str(sessionPrefix + s.ID),
		attrKind:     str(kindSession),
		attrVersion:  num(s.Version),
		attrStatus:   str(string(s.Status)),
		attrDoc:      str(string(doc)),
	}
	maps.Copy(item, sessionIndexAttrs(s))
	maps.Copy(item, sessionListAttrs(s))
	// A session whose auth.granted event is still to be delivered must
	// outlive its retention until the sweep delivers it (and clears the
	// flag, which brings the ttl back).
	if !s.EventPending {
		item[TTLAttribute] = num(epochCeil(s.ExpiresAt.Add(SessionRetention)))
	}
	if s.CompletedAt != nil {
		at, err := timeText(*s.CompletedAt)
		if err != nil {
			return nil, fmt.Errorf("encode completedAt: %w", err)
		}
		item[attrCompletedAt] = str(at)
	}
	return item, nil
}

// sessionState is a stored session as CompleteSession needs it: the doc
// text it conditions on and the attributes it replaces.
type sessionState struct {
	version int64
	status  domain.SessionStatus
	doc     string
}

// decodeSession reads a session item and returns it with its state.
// Errors wrap domain.ErrCorrupt.
func decodeSession(id string, item map[string]types.AttributeValue) (domain.Session, sessionState, error) {
	fail := func(err error) (domain.Session, sessionState, error) { return domain.Session{}, sessionState{}, err }
	if err := checkKind(item, kindSession); err != nil {
		return fail(err)
	}
	version, err := needN(item, attrVersion)
	if err != nil {
		return fail(err)
	}
	status, err := needS(item, attrStatus)
	if err != nil {
		return fail(err)
	}
	doc, err := needS(item, attrDoc)
	if err != nil {
		return fail(err)
	}
	var s domain.Session
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		return fail(fmt.Errorf("%w: doc: %s", domain.ErrCorrupt, domain.JSONErrorWithoutContent(err)))
	}
	s.ID, s.Version, s.Status, s.CompletedAt = id, version, domain.SessionStatus(status), nil
	if _, ok := item[attrCompletedAt]; ok {
		at, err := needTime(item, attrCompletedAt)
		if err != nil {
			return fail(err)
		}
		s.CompletedAt = &at
	}
	return s, sessionState{version: version, status: s.Status, doc: doc}, nil
}

// sessionIndexAttrs are the attributes that put s in the table's indexes:
// its expiry and sweep set always (SweepIndex), and its resume target's
// key only while it is pending and that target is complete (PendingIndex
// is sparse). Every write of a session item sets them from the session it
// writes; CompleteSession, which does not rewrite the item, sets and
// removes them itself.
func sessionIndexAttrs(s domain.Session) map[string]types.AttributeValue {
	attrs := map[string]types.AttributeValue{
		attrExpiresAt: num(s.ExpiresAt.UnixMilli()),
		attrSweepSet:  str(string(domain.SweepSetOf(s))),
	}
	if t := s.Resume.Target(); s.Status == domain.SessionPending && t.Validate() == nil {
		attrs[attrPendingFor] = str(pendingFor(t))
	}
	return attrs
}

// pendingFor is PendingIndex's partition key for a resume target: the
// target's key (domain.ResumeTargetKey), which names the swarm, the
// instance key and the agent, so that swarms sharing an instance key and
// an Agent name are different partitions.
func pendingFor(t domain.ResumeTarget) string { return domain.ResumeTargetKey(t) }

// legacyPendingFor is the partition key versions before issue 17 wrote: a
// hash of the instance key and agent name alone, with no swarm (64 hex
// digits, never "rt-…", so the two never meet). Only ListPendingSessions
// reads it, for the items those versions left; nothing writes it.
func legacyPendingFor(instanceKey, agentName string) string {
	h := sha256.New()
	for _, part := range []string{instanceKey, agentName} {
		h.Write(binary.AppendUvarint(nil, uint64(len(part))))
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// reuseUntil is the first Unix millisecond at which s no longer answers
// a repeated request (domain.Session.ReusableAt), rounded up so that a
// pointer never looks free while its session is still reusable.
func reuseUntil(s domain.Session) int64 {
	t := s.ExpiresAt.Add(-domain.SessionReuseMargin)
	ms := t.UnixMilli()
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// reusePointerItem is the item that says sess has taken its reuse key:
// the session's id and reuseUntil, removed by TTL once the session has
// expired.
func reusePointerItem(sess domain.Session) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		PartitionKey:   str(reusePrefix + sess.ReuseKey),
		attrKind:       str(kindReusePointer),
		attrSessionID:  str(sess.ID),
		attrReuseUntil: num(reuseUntil(sess)),
		TTLAttribute:   num(epochCeil(sess.ExpiresAt)),
	}
}

// decodeReusePointer reads a pointer item. Errors wrap domain.ErrCorrupt.
func decodeReusePointer(item map[string]types.AttributeValue) (id string, until int64, err error) {
	if err := checkKind(item, kindReusePointer); err != nil {
		return "", 0, err
	}
	if id, err = needS(item, attrSessionID); err != nil {
		return "", 0, err
	}
	if err := domain.ValidateSessionID(id); err != nil {
		return "", 0, fmt.Errorf("%w: attribute %s is not a session id", domain.ErrCorrupt, attrSessionID)
	}
	if until, err = needN(item, attrReuseUntil); err != nil {
		return "", 0, err
	}
	return id, until, nil
}
