package web

import (
	"context"
	"time"
)

// DefaultAttachmentsCollectAfter is how long content released through
// replication waits before it is deleted (--attachments-collect-after).
const DefaultAttachmentsCollectAfter = time.Hour

// maybeCollectAttachments starts a pass over every database deleting the
// attachment content that replication released at least
// AttachmentsCollectAfter ago and that nothing refers to (called by the
// ticker; a pass runs at most every minute, or every collect-after when
// that is shorter, and never two at once).
func (s *Server) maybeCollectAttachments(now time.Time) {
	every := min(time.Minute, s.cfg.AttachmentsCollectAfter)
	if now.Sub(s.lastCollect) < every || !s.collecting.CompareAndSwap(false, true) {
		return
	}
	s.lastCollect = now
	dbs := s.catalog.All()
	before := now.Add(-s.cfg.AttachmentsCollectAfter)
	s.backgroundPass(&s.collecting, func(ctx context.Context) {
		for _, db := range dbs {
			n, err := db.CollectReleased(ctx, before)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("collecting released attachment content", "db", db.Name(), "err", err)
				}
				continue
			}
			if n > 0 {
				s.log.Info("released attachment content deleted", "db", db.Name(), "contents", n)
			}
		}
	})
}
