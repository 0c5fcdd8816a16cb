package subscriptions

import "time"

// health is the hysteresis between OK and SLOW. One sample's raw status
// can flip between the two as batches come and go (the backlog happens to
// be higher at the window's end than at its start), so the reported status
// turns SLOW only after the raw status has been SLOW for hold without a
// break, and back to OK only after it has not been SLOW for as long.
// STALLED, STOPPED and REWOUND are reported at once: each is a fact of the
// moment (no worker, no acknowledgement, a position moved back), not a
// trend, and hiding it would hide an outage.
type health struct {
	shown     string
	slowSince time.Time // start of the current run of raw SLOW samples
	okSince   time.Time // start of the current run of raw OK samples while SLOW is shown
}

// next takes one sample's raw status and returns the status to report.
func (h *health) next(raw string, now time.Time, hold time.Duration) string {
	switch raw {
	case Slow:
		h.okSince = time.Time{}
		if h.slowSince.IsZero() {
			h.slowSince = now
		}
		if h.shown == Slow || now.Sub(h.slowSince) >= hold {
			h.shown = Slow
		} else {
			h.shown = OK // progressing; the growth is not confirmed yet
		}
	case OK:
		h.slowSince = time.Time{}
		if h.shown == Slow {
			if h.okSince.IsZero() {
				h.okSince = now
			}
			if now.Sub(h.okSince) < hold {
				return Slow
			}
		}
		h.okSince = time.Time{}
		h.shown = OK
	default:
		h.slowSince, h.okSince = time.Time{}, time.Time{}
		h.shown = raw
	}
	return h.shown
}
