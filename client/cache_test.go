package client

import (
	"fmt"
	"testing"
)

func TestHTTPCacheBoundedLRU(t *testing.T) {
	body := make([]byte, 1000)
	c := newHTTPCache(10 * entryCost("http://x/docs?id=00", body))
	for i := range 20 {
		c.put(fmt.Sprintf("http://x/docs?id=%02d", i), "e", body)
		if i == 5 {
			c.get("http://x/docs?id=00") // keep 00 recently used
		}
	}
	n, size := c.stats()
	if n > 10 || size > c.max {
		t.Fatalf("cache grew past its bound: %d entries, %d bytes (max %d)", n, size, c.max)
	}
	if _, _, ok := c.get("http://x/docs?id=01"); ok {
		t.Error("least recently used entry not evicted")
	}
	if _, _, ok := c.get("http://x/docs?id=19"); !ok {
		t.Error("newest entry evicted")
	}
	// replacing keeps one entry
	c.put("http://x/docs?id=19", "f", []byte("{}"))
	if etag, b, _ := c.get("http://x/docs?id=19"); etag != "f" || string(b) != "{}" {
		t.Errorf("replace: %q %q", etag, b)
	}
	// too big for the cache: not stored
	c.put("http://x/big", "g", make([]byte, c.max))
	if _, _, ok := c.get("http://x/big"); ok {
		t.Error("oversized body cached")
	}
	var disabled *httpCache = newHTTPCache(-1)
	disabled.put("u", "e", body)
	if _, _, ok := disabled.get("u"); ok {
		t.Error("disabled cache stored something")
	}
}
