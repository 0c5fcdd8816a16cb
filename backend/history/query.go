package history

import (
	"strconv"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
)

// ParseQuery reads a history request's since (unix seconds, optional) and
// kind (comma-separated kinds, optional) parameters; match is nil when
// every kind is wanted. Bad values are dberr.BadRequest.
func ParseQuery(since, kinds string) (at time.Time, match func(Key) bool, err error) {
	if since != "" {
		n, err := strconv.ParseInt(since, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return at, nil, dberr.New(dberr.BadRequest, "since must be a time in unix seconds, not %q", clip(since))
		}
		at = time.Unix(n, 0)
	}
	if kinds == "" {
		return at, nil, nil
	}
	want := map[string]bool{}
	for _, k := range strings.SplitN(kinds, ",", 8) {
		if Unit(k) == "" {
			return at, nil, dberr.New(dberr.BadRequest, "unknown kind %q (the kinds are %s, %s, %s and %s)", clip(k),
				KindWrites, KindReplItems, KindReplSeconds, KindSubBacklog)
		}
		want[k] = true
	}
	return at, func(k Key) bool { return want[k.Kind] }, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
