package log

import "time"

// touch records that producer id appended at now.
func (ps *producerState) touch(id int64, now time.Time) {
	if e := ps.m[id]; e != nil {
		e.lastSeen = now
	}
}

// expireProducersLocked forgets idempotent producers idle for
// ProducerIDExpiration, so that a partition that sees many short-lived
// producers does not grow its table (and snapshots) without bound. An entry
// loaded from a snapshot or replayed at open starts its idle time at the
// first call. A producer with an open transaction is kept (as in Kafka):
// forgetting it would move the last stable offset. Log.mu is held for writing.
func (l *Log) expireProducersLocked(now time.Time) {
	expired := 0
	for id, e := range l.producers.m {
		if e.TxnFirst >= 0 {
			continue
		}
		if e.lastSeen.IsZero() {
			e.lastSeen = now
			continue
		}
		if now.Sub(e.lastSeen) >= l.cfg.ProducerIDExpiration {
			delete(l.producers.m, id)
			expired++
		}
	}
	if expired > 0 {
		l.producers.dirty = true // the next snapshot leaves them out
		l.logger.Info("expired idle producer ids", "count", expired, "remaining", len(l.producers.m), "idle_limit", l.cfg.ProducerIDExpiration)
	}
}

// Producers returns how many idempotent producers the partition remembers.
func (l *Log) Producers() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.producers.m)
}
