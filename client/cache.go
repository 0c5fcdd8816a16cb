package client

import (
	"container/list"
	"sync"
)

// notFoundEtag is the cache marker for a URL that answered 404; it is sent
// back as If-None-Match so the server can answer 304 while the resource is
// still missing.
const notFoundEtag = "404 Response"

// httpCache keeps response bodies of GET requests by full URL, with the
// server's ETag. It is bounded by the total size of the bodies and evicts
// the least recently used entries first.
type httpCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	entries map[string]*list.Element
	lru     list.List // front = most recently used; values are *cacheEntry
}

type cacheEntry struct {
	url  string
	etag string // without quotes; notFoundEtag for a cached 404
	body []byte
}

func newHTTPCache(maxBytes int64) *httpCache {
	if maxBytes < 0 {
		return nil
	}
	return &httpCache{max: maxBytes, entries: make(map[string]*list.Element)}
}

// get returns the etag and body cached for url.
func (c *httpCache) get(url string) (etag string, body []byte, ok bool) {
	if c == nil {
		return "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[url]
	if !ok {
		return "", nil, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.etag, e.body, true
}

// put stores body under url; an existing entry is replaced.
func (c *httpCache) put(url, etag string, body []byte) {
	if c == nil || etag == "" {
		return
	}
	cost := entryCost(url, body)
	if cost > c.max {
		c.remove(url)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[url]; ok {
		old := el.Value.(*cacheEntry)
		c.size -= entryCost(old.url, old.body)
		old.etag, old.body = etag, body
		c.size += cost
		c.lru.MoveToFront(el)
	} else {
		c.entries[url] = c.lru.PushFront(&cacheEntry{url: url, etag: etag, body: body})
		c.size += cost
	}
	for c.size > c.max {
		el := c.lru.Back()
		if el == nil {
			break
		}
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, e.url)
		c.size -= entryCost(e.url, e.body)
	}
}

func (c *httpCache) remove(url string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[url]; ok {
		e := el.Value.(*cacheEntry)
		c.lru.Remove(el)
		delete(c.entries, url)
		c.size -= entryCost(e.url, e.body)
	}
}

// stats returns the number of entries and their total cost.
func (c *httpCache) stats() (entries int, size int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.size
}

func entryCost(url string, body []byte) int64 {
	return int64(len(url) + len(body) + 64)
}
