package mcpapi

import (
	"context"
	"errors"
	"iter"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the events kept for resumption.
const (
	// defaultEventBytes bounds the events kept over all sessions: past
	// it, the oldest events of every stream go first.
	defaultEventBytes = 8 << 20
	// maxStreamsPerSession bounds the request streams a session keeps
	// events of (its standalone stream aside): every request opens one,
	// and a session may make any number of requests.
	maxStreamsPerSession = 32
)

// errStreamGone: the events of a stream were dropped (the session's
// newer streams took its place, or the session closed).
var errStreamGone = errors.New("mcpapi: the stream's events are no longer kept")

// eventStore keeps the events of the sessions' streams so a client that
// lost one resumes it with Last-Event-ID (the SDK's resumability: event
// ids and a priming event on every stream). It is the SDK's
// MemoryEventStore's rules — a byte bound over all sessions, the oldest
// events dropped first — with a bound on the streams of a session, which
// MemoryEventStore keeps until the session ends (so one session's
// requests would grow it without end). SessionClosed is also the SDK's
// one hook on a session's end: it tells the registry.
type eventStore struct {
	maxBytes int
	onClosed func(sessionID string)

	mu       sync.Mutex
	n        int
	sessions map[string]*streamEvents // by session id (never logged)
}

var _ mcp.EventStore = (*eventStore)(nil)

// streamEvents is a session's streams, the request streams in the order
// they opened.
type streamEvents struct {
	streams map[string]*eventList
	order   []string
}

// eventList is a stream's events from index first on.
type eventList struct {
	first int
	data  [][]byte
	size  int
}

func newEventStore(maxBytes int, onClosed func(string)) *eventStore {
	return &eventStore{maxBytes: maxBytes, onClosed: onClosed, sessions: map[string]*streamEvents{}}
}

// Open implements mcp.EventStore.
func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses := s.sessions[sessionID]
	if ses == nil {
		ses = &streamEvents{streams: map[string]*eventList{}}
		s.sessions[sessionID] = ses
	}
	if _, ok := ses.streams[streamID]; ok {
		return nil
	}
	ses.streams[streamID] = &eventList{}
	if streamID == "" { // the standalone stream lives as long as the session
		return nil
	}
	ses.order = append(ses.order, streamID)
	if len(ses.order) > maxStreamsPerSession {
		old := ses.order[0]
		ses.order = slices.Delete(ses.order, 0, 1)
		s.n -= ses.streams[old].size
		delete(ses.streams, old)
	}
	return nil
}

// Append implements mcp.EventStore.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses := s.sessions[sessionID]
	if ses == nil || ses.streams[streamID] == nil {
		return errStreamGone
	}
	// Purge first, so the newest event is kept even when it alone is over
	// the bound.
	s.purge(len(data))
	l := ses.streams[streamID]
	l.data = append(l.data, data)
	l.size += len(data)
	s.n += len(data)
	return nil
}

// purge drops the oldest event of every stream until room more bytes fit.
func (s *eventStore) purge(room int) {
	for s.n+room > s.maxBytes {
		dropped := false
		for _, ses := range s.sessions {
			for _, l := range ses.streams {
				if len(l.data) == 0 {
					continue
				}
				s.n -= len(l.data[0])
				l.size -= len(l.data[0])
				l.data[0] = nil
				l.data = l.data[1:]
				l.first++
				dropped = true
			}
		}
		if !dropped {
			return
		}
	}
}

// After implements mcp.EventStore: the events after index, or an error
// when one of them was dropped.
func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var data [][]byte
	err := errStreamGone
	if ses := s.sessions[sessionID]; ses != nil {
		if l := ses.streams[streamID]; l != nil {
			err = nil
			switch start := index + 1 - l.first; {
			case start < 0:
				err = mcp.ErrEventsPurged
			case start < len(l.data):
				data = slices.Clone(l.data[start:])
			}
		}
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	if ses := s.sessions[sessionID]; ses != nil {
		for _, l := range ses.streams {
			s.n -= l.size
		}
		delete(s.sessions, sessionID)
	}
	s.mu.Unlock()
	if s.onClosed != nil {
		s.onClosed(sessionID)
	}
	return nil
}

// bytes reports the bytes kept and the streams of a session (tests).
func (s *eventStore) bytes(sessionID string) (n, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ses := s.sessions[sessionID]; ses != nil {
		streams = len(ses.streams)
	}
	return s.n, streams
}
