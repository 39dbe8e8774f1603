package dynamostore

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxKnown bounds each map of known. The callback reads a session and
// completes it moments later in the same Lambda, so a small map is plenty.
const maxKnown = 256

// known holds the last state this Store saw of a few records: what it read
// or wrote, or what a failed condition returned. It is only ever a guess
// that a conditional write checks: a stale entry makes the write fail, the
// failure returns the current item, and the write is retried with that, so
// a guess costs at most a round trip and never a wrong write. The zero
// value is ready to use.
type known struct {
	mu       sync.Mutex
	sessions map[string]sessionState
	grants   map[string]grantState
	// turnInsts are turn instance items by instance hash.
	turnInsts map[string]map[string]types.AttributeValue
}

func (k *known) turnInst(h string) (map[string]types.AttributeValue, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	item, ok := k.turnInsts[h]
	return item, ok
}

func (k *known) setTurnInst(h string, item map[string]types.AttributeValue) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.turnInsts = put(k.turnInsts, h, item)
}

func (k *known) dropTurnInst(h string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.turnInsts, h)
}

func (k *known) session(id string) (sessionState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.sessions[id]
	return st, ok
}

func (k *known) setSession(id string, st sessionState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sessions = put(k.sessions, id, st)
}

func (k *known) dropSession(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.sessions, id)
}

// grant returns what is known of grant id; a grant never seen is guessed
// absent.
func (k *known) grant(id string) grantState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.grants[id]
}

func (k *known) setGrant(id string, st grantState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.grants = put(k.grants, id, st)
}

// put adds id to m, making room by dropping an arbitrary entry (map order
// is random) when m is full.
func put[T any](m map[string]T, id string, v T) map[string]T {
	if m == nil {
		m = make(map[string]T)
	}
	if _, ok := m[id]; !ok && len(m) >= maxKnown {
		for old := range m {
			delete(m, old)
			break
		}
	}
	m[id] = v
	return m
}
