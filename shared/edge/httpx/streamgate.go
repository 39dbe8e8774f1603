package httpx

import (
	"net/http"
	"strconv"
	"sync"
)

// Stream caps: how many event streams one process serves at once to one
// principal, and in all. A stream holds a connection, a goroutine and a
// store poll for minutes; without a cap one credential could hold them
// all.
const (
	DefaultStreamsPerPrincipal = 8
	DefaultStreamsTotal        = 1024
	// streamRetryAfter is the Retry-After of a refused stream, seconds.
	streamRetryAfter = 5
)

// CodeTooManyStreams is the error code of a stream refused by its cap.
const CodeTooManyStreams = "tooManyStreams"

// StreamGate counts the open event streams of one process by principal.
// Every stream route of the process shares one gate (app builds it), so
// the total cap holds across them. Safe for concurrent use.
type StreamGate struct {
	maxPer, maxTotal int

	mu    sync.Mutex
	per   map[string]int
	total int
}

// NewStreamGate returns a gate with the caps (≤ 0: the defaults).
func NewStreamGate(perPrincipal, total int) *StreamGate {
	if perPrincipal <= 0 {
		perPrincipal = DefaultStreamsPerPrincipal
	}
	if total <= 0 {
		total = DefaultStreamsTotal
	}
	return &StreamGate{maxPer: perPrincipal, maxTotal: total, per: map[string]int{}}
}

// Enter admits one more stream of principal; ok is false when a cap is
// reached. leave must be called once when the stream ends.
func (g *StreamGate) Enter(principal string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total >= g.maxTotal || g.per[principal] >= g.maxPer {
		return nil, false
	}
	g.total++
	g.per[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if g.per[principal]--; g.per[principal] <= 0 {
				delete(g.per, principal) // the map holds only open streams
			}
		})
	}, true
}

// Open reports the streams open now, in all and of principal.
func (g *StreamGate) Open(principal string) (total, ofPrincipal int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total, g.per[principal]
}

// RefuseTooManyStreams answers a stream over its cap: 429 with
// Retry-After, saying which cap and what to do.
func (g *StreamGate) RefuseTooManyStreams(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
	WriteError(w, r, http.StatusTooManyRequests, CodeTooManyStreams,
		"too many open event streams: at most "+strconv.Itoa(g.maxPer)+" per caller and "+strconv.Itoa(g.maxTotal)+
			" in all on this server; close a stream you no longer read, or retry later")
}
