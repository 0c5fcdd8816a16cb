// Package static holds the studio's CSS and JavaScript, embedded in the
// binary: no CDN is ever needed, and air-gapped servers work as they are.
package static

import "embed"

// Files are the static assets, served under /static/.
//
//go:embed *.css *.js vendor
var Files embed.FS
