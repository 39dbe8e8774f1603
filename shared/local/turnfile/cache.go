package turnfile

import (
	"container/list"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

// DefaultCacheBytes bounds the states a Store keeps in memory unless
// CacheBytes says otherwise. The cost of a state is the size of the files
// it was read from (snapshot and journal); the heap it holds is about 1.3
// times that (BenchmarkHeapFor400Instances).
const DefaultCacheBytes = 16 << 20

// cached is an instance's state as last read by this process, with the
// file sizes it was read from: a read after this process's own commit (or
// another's append) parses only the new journal lines.
type cached struct {
	snapSize int64
	snapTime time.Time
	valid    int64 // journal bytes folded into st
	st       turn.State
}

// cost is what c counts against the cache's bound: the bytes it was read
// from.
func (c cached) cost() int64 { return c.snapSize + c.valid }

// lru holds the most recently used states up to max bytes (cost). It is
// not safe for concurrent use: Store.mu guards it.
type lru struct {
	max   int64
	used  int64
	order *list.List // of *lruEntry, most recently used first
	byDir map[string]*list.Element
}

type lruEntry struct {
	dir string
	c   cached
}

func newLRU(max int64) *lru {
	return &lru{max: max, order: list.New(), byDir: map[string]*list.Element{}}
}

// get returns dir's state and marks it used.
func (l *lru) get(dir string) (cached, bool) {
	e, ok := l.byDir[dir]
	if !ok {
		return cached{}, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry).c, true
}

// put keeps c as dir's state, the most recently used, and evicts the
// least recently used until the cache fits. A state larger than the
// whole cache is not kept: it would evict everything else.
func (l *lru) put(dir string, c cached) {
	l.remove(dir)
	if l.max <= 0 || c.cost() > l.max {
		return
	}
	l.byDir[dir] = l.order.PushFront(&lruEntry{dir: dir, c: c})
	l.used += c.cost()
	for l.used > l.max {
		l.remove(l.order.Back().Value.(*lruEntry).dir)
	}
}

func (l *lru) remove(dir string) {
	e, ok := l.byDir[dir]
	if !ok {
		return
	}
	l.order.Remove(e)
	delete(l.byDir, dir)
	l.used -= e.Value.(*lruEntry).c.cost()
}

// clear drops every state.
func (l *lru) clear() {
	l.order.Init()
	clear(l.byDir)
	l.used = 0
}

// dirs lists the cached directories, most recently used first (tests).
func (l *lru) dirs() []string {
	var out []string
	for e := l.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*lruEntry).dir)
	}
	return out
}
