package dynamostore

import "sync"

// blobCacheBytes bounds what a Store keeps of the S3 objects it read or
// wrote. A Lambda environment runs one instance's steps after another; the
// instance item of a busy instance, once it is over BlobThreshold, is read
// at every step, and its object is named by its content, so a kept copy is
// never stale.
const blobCacheBytes = 16 << 20

// blobCache keeps S3 objects by key, up to blobCacheBytes; when full, it
// forgets the oldest first.
type blobCache struct {
	mu    sync.Mutex
	data  map[string][]byte
	order []string
	bytes int
}

func (c *blobCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.data[key]
	return b, ok
}

func (c *blobCache) put(key string, b []byte) {
	if len(b) > blobCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	if _, ok := c.data[key]; ok {
		return
	}
	for c.bytes+len(b) > blobCacheBytes && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= len(c.data[old])
		delete(c.data, old)
	}
	c.data[key] = b
	c.order = append(c.order, key)
	c.bytes += len(b)
}
