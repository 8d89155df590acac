package server

import "time"

// cleanerLoop runs log compaction (topics with cleanup.policy=compact,
// __consumer_offsets among them) every log.cleaner.backoff.ms until
// Shutdown. A pass skips logs that closed no segment since their last one.
func (s *Server) cleanerLoop() {
	backoff := 15 * time.Second
	if gc, err := s.cfg.Group(); err == nil {
		backoff = time.Duration(gc.LogCleanerBackoffMs) * time.Millisecond
	}
	s.runEvery(backoff, func() {
		if err := s.mgr.RunCompaction(); err != nil {
			s.logger.Error("compaction pass", "err", err)
		}
	})
}
