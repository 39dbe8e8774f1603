package kmsseal

import (
	"container/list"
	"sync"
	"time"
)

// cacheKey is a SHA-256 over what a cached key may serve (see openKey and
// sealKey); never over the plaintext key.
type cacheKey [32]byte

// lru is a size-bounded, least-recently-used cache whose entries also
// expire at a fixed time set when they are put. Safe for concurrent use.
type lru[V any] struct {
	mu  sync.Mutex
	max int
	ll  *list.List // front: most recently used
	m   map[cacheKey]*list.Element
}

type lruEntry[V any] struct {
	key     cacheKey
	val     V
	expires time.Time
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, ll: list.New(), m: make(map[cacheKey]*list.Element)}
}

// get returns the live value for k and marks it used; an expired entry is
// dropped and reported as a miss.
func (c *lru[V]) get(k cacheKey, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.m[k]
	if !ok {
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	if !now.Before(e.expires) {
		c.removeLocked(el)
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// put stores v under k until expires, replacing what was there, and
// evicts expired entries from the cold end and then the least recently
// used ones until the bound holds.
func (c *lru[V]) put(k cacheKey, v V, now, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		c.removeLocked(el)
	}
	c.m[k] = c.ll.PushFront(&lruEntry[V]{key: k, val: v, expires: expires})
	for el := c.ll.Back(); el != nil && c.ll.Len() > 1; {
		prev := el.Prev()
		e := el.Value.(*lruEntry[V])
		if now.Before(e.expires) && c.ll.Len() <= c.max {
			break
		}
		c.removeLocked(el)
		el = prev
	}
}

// removeIf drops k's entry if match says it is still the one the caller
// saw (another goroutine may have replaced it meanwhile).
func (c *lru[V]) removeIf(k cacheKey, match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok && match(el.Value.(*lruEntry[V]).val) {
		c.removeLocked(el)
	}
}

func (c *lru[V]) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.ll.Front(); el != nil; el = c.ll.Front() {
		c.removeLocked(el)
	}
}

func (c *lru[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// removeLocked unlinks el and clears its value, so the evicted key
// schedule is unreachable from the cache at once.
func (c *lru[V]) removeLocked(el *list.Element) {
	e := el.Value.(*lruEntry[V])
	delete(c.m, e.key)
	c.ll.Remove(el)
	var zero V
	e.val = zero
}
