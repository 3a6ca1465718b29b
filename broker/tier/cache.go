package tier

import (
	"container/list"
	"context"
	"sync"
)

// chunkCache is the bounded read-ahead cache of remote reads: objects are
// read in aligned chunks of chunkBytes (one ranged GET each), so that a
// consumer reading a segment sequentially costs one GET per chunk, and
// the chunks are kept in LRU order within maxBytes. Index objects are
// cached whole under the same bound.
type chunkCache struct {
	chunkBytes int64
	maxBytes   int64

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *chunk, most recent at the front
	items map[chunkID]*list.Element
	// loading dedupes concurrent GETs of one chunk.
	loading map[chunkID]*load
}

type chunkID struct {
	key string
	n   int64 // chunk number; -1 for a whole object
}

type chunk struct {
	id   chunkID
	data []byte
}

type load struct {
	done chan struct{}
	data []byte
	err  error
}

func newChunkCache(chunkBytes, maxBytes int64) *chunkCache {
	return &chunkCache{chunkBytes: chunkBytes, maxBytes: maxBytes, lru: list.New(), items: map[chunkID]*list.Element{}, loading: map[chunkID]*load{}}
}

// get returns the cached bytes of id, or fetches them with fetch.
func (c *chunkCache) get(ctx context.Context, id chunkID, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.items[id]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*chunk).data, nil
	}
	if l, ok := c.loading[id]; ok {
		c.mu.Unlock()
		select {
		case <-l.done:
			return l.data, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := &load{done: make(chan struct{})}
	c.loading[id] = l
	c.mu.Unlock()

	l.data, l.err = fetch(ctx)
	c.mu.Lock()
	delete(c.loading, id)
	if l.err == nil && int64(len(l.data)) <= c.maxBytes {
		c.items[id] = c.lru.PushFront(&chunk{id: id, data: l.data})
		c.size += int64(len(l.data))
		for c.size > c.maxBytes {
			e := c.lru.Back()
			ch := e.Value.(*chunk)
			c.lru.Remove(e)
			delete(c.items, ch.id)
			c.size -= int64(len(ch.data))
		}
	}
	c.mu.Unlock()
	close(l.done)
	return l.data, l.err
}

// forget drops every chunk of key (its object was deleted).
func (c *chunkCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.items {
		if id.key == key {
			c.lru.Remove(e)
			delete(c.items, id)
			c.size -= int64(len(e.Value.(*chunk).data))
		}
	}
}

// bytes returns the cached size (tests and metrics).
func (c *chunkCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}
