package gitstore

import (
	"container/list"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// entryOverhead is what an entry costs beyond its content (list element,
// map slot, header), counted so that many tiny objects cannot grow the
// cache past its bound either.
const entryOverhead = 128

// lru keeps objects by hash, least recently used out first, up to max
// bytes of content and overhead. An object too large to keep (over a
// quarter of max) is remembered as existing, without its content, so
// writing it again still skips the PUT.
type lru struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // of *stored, most recent first; type InvalidObject: known to exist, content not kept
	byKey map[plumbing.Hash]*list.Element
}

func newLRU(max int64) *lru {
	return &lru{max: max, order: list.New(), byKey: map[plumbing.Hash]*list.Element{}}
}

func weight(s *stored) int64 { return entryOverhead + int64(len(s.data)) }

// get returns object h when its content is kept (nil when only its
// existence is), and whether h is known to exist.
func (c *lru) get(h plumbing.Hash) (*stored, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[h]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	s := e.Value.(*stored)
	if s.t == plumbing.InvalidObject {
		return nil, true
	}
	return s, true
}

// add keeps s (or, when it is too large, that it exists).
func (c *lru) add(s *stored) {
	if int64(len(s.data)) > c.max/4 {
		s = &stored{h: s.h, t: plumbing.InvalidObject}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[s.h]; ok {
		old := e.Value.(*stored)
		if old.t != plumbing.InvalidObject || s.t == plumbing.InvalidObject {
			c.order.MoveToFront(e)
			return
		}
		c.used -= weight(old)
		c.order.Remove(e)
		delete(c.byKey, s.h)
	}
	c.byKey[s.h] = c.order.PushFront(s)
	c.used += weight(s)
	for c.used > c.max {
		last := c.order.Back()
		if last == nil {
			break
		}
		old := c.order.Remove(last).(*stored)
		delete(c.byKey, old.h)
		c.used -= weight(old)
	}
}

// size is how many bytes the cache counts, and how many entries it holds.
func (c *lru) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.byKey)
}
