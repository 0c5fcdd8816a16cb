package indexes

import (
	"fmt"
	"strings"
	"time"
)

// ActionNever is Next's answer for an index the cleanup never touches.
const ActionNever = "never"

// Next says what the cleanup will do to one index next, when, and why, if
// nothing changes meanwhile (a query of the index, or of its collection
// through other indexes, moves the answer). It reads the same rules as
// Decide: since is when the usage record began, collection the latest
// query of the index's collection through any index (zero: none seen).
//
// The action is ActionNever (static or disabled indexes: at is zero),
// ActionIdle or ActionDelete at a time (now or earlier when the next pass
// will act), ActionKeep when the time has passed but the collection's
// quiet keeps the index (at is when it would have acted), or ActionDelete
// with a zero time for a superseded index, deleted once the index that
// replaces it has caught up.
func Next(now time.Time, cfg Config, since time.Time, u Usage, collection time.Time) (action string, at time.Time, why string) {
	switch {
	case !u.Auto:
		return ActionNever, time.Time{}, "static index: the cleanup never touches it"
	case strings.EqualFold(u.State, "Disabled"):
		return ActionNever, time.Time{}, "disabled: the cleanup leaves disabled indexes alone"
	case u.Superseded != "":
		return ActionDelete, time.Time{}, fmt.Sprintf("superseded by %s: deleted %s after it has caught up (%s)", u.Superseded, round(cfg.SupersededGrace), KeySupersededGrace)
	}
	last := latest(u.LastQueried, u.Created, since)
	lastText := "not queried since " + stamp(last)
	if u.LastQueried.IsZero() {
		lastText = "never queried (counted from " + stamp(last) + ")"
	}
	action, wait, key, word := ActionIdle, cfg.IdleAfter, KeyIdleAfter, "becomes Idle"
	if strings.EqualFold(u.State, "Idle") {
		action, wait, key, word = ActionDelete, cfg.DeleteAfter, KeyDeleteAfter, "is deleted"
	}
	at = last.Add(wait)
	cond := fmt.Sprintf("only if collection %s is queried through other indexes after %s", u.Collection, stamp(last))
	if collection.After(last) {
		cond = fmt.Sprintf("collection %s was queried through other indexes at %s", u.Collection, stamp(collection))
	}
	if !at.After(now) && !collection.After(last) {
		return ActionKeep, at, fmt.Sprintf("%s, more than %s = %s, but kept: collection %s has not been queried since either, so the application may not be running; it %s at the next pass after such a query",
			lastText, key, round(wait), u.Collection, word)
	}
	if !at.After(now) {
		return action, at, fmt.Sprintf("%s, more than %s = %s, and %s: it %s at the next pass", lastText, key, round(wait), cond, word)
	}
	return action, at, fmt.Sprintf("%s; it %s %s after that (%s) %s; a query of the index resets the clock", lastText, word, round(wait), key, cond)
}
