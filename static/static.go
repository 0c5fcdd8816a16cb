// Package static holds the studio's CSS and JavaScript, embedded in the
// binary: no CDN is ever needed, and air-gapped servers work as they are.
package static

import "embed"

// Files are the static assets, served under /static/.
//
//go:embed *.css *.js *.svg vendor
var Files embed.FS

// Favicon is the studio's icon (favicon.svg), also answered at
// /favicon.ico for browsers that ask there whatever the page says.
var Favicon = func() []byte {
	b, err := Files.ReadFile("favicon.svg")
	if err != nil {
		panic(err)
	}
	return b
}()
