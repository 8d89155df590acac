package server

// Fetch (key 1), versions 4-12.
//
// Long poll: the answer waits until MinBytes of records are available, an
// error occurs, MaxWaitMillis passes, the client goes away or the server
// shuts down, woken by each partition log's Changed() channel (no polling).
// MaxBytes and PartitionMaxBytes are soft as in Kafka: the first batch of the
// first partition with data is returned whole even when larger; later
// partitions are limited by what remains. As in Kafka the answer's limit is
// min(MaxBytes, broker fetch.max.bytes) (MaxBytes <= 0 counts as 0: only the
// first batch found), and a partition named twice in a full fetch is read
// once (as in Kafka, the last mention's offset and limit, at the first
// mention's place). Whatever the configuration, an answer
// never holds more than maxFetchAnswerRecords bytes of records, so its int32
// size cannot overflow. Reads stop at the high watermark
// (= log end offset on a single node; the minimum log end over the ISR in
// cluster mode), or the last stable offset for read_committed. A replica's
// fetch (ReplicaID >= 0, cluster mode) reads up to the log end and reports
// the follower's position to the leader (replication.go). A fetch offset outside
// [log start, log end] is OFFSET_OUT_OF_RANGE. The answer carries the high
// watermark, last stable offset and the log start offset. Zero copy: the response frame is encoded here (fetch_encode.go)
// around the records fields, and each record range goes out with
// Region.WriteTo, i.e. sendfile(2) from the segment file to the socket.
//
// Incremental fetch sessions (KIP-227, v7+) are served: see
// fetch_session.go; max.incremental.fetch.session.cache.slots = 0 turns them
// off (every answer then carries SessionID 0 and clients send full fetches).
//
// read_committed (IsolationLevel 1) reads below the last stable offset and
// carries the aborted transactions in range: fetch_txn.go.
//
// Deviations from Kafka: RackID / preferred read replica do not apply (always -1);
// partitions that returned data are not rotated to the end of a session's
// order.

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/clock"
)

// maxFetchAnswerRecords bounds the record bytes of one Fetch answer whatever
// fetch.max.bytes and max.message.bytes say: the rest of the frame (about 50
// bytes per partition named) then keeps it well below 2 GiB.
const maxFetchAnswerRecords = 1 << 30

// fetchPartition is one partition's part of a Fetch answer.
type fetchPartition struct {
	partition     int32
	code          int16
	hw, logStart  int64
	region        plog.Region // nil or empty: no records
	fetchOffset   int64
	topicName     string
	preferredRead int32
	lastStable    int64
	aborted       []plog.AbortedTxn // read_committed only (fetch_txn.go); nil = null
	diverging     *divergingEpoch   // v12 tagged field 0, a follower's only (replication.go)
}

// divergingEpoch is KIP-320's answer to a follower whose log diverged: the
// leader's end offset of the largest epoch at or below its last fetched one.
type divergingEpoch struct {
	epoch     int32
	endOffset int64
}

// fetchTopic is one topic's part of a Fetch answer.
type fetchTopic struct {
	name  string
	parts []fetchPartition
}

// fetchTarget is one partition a Fetch reads, from the request or from the
// session.
type fetchTarget struct {
	topicName   string
	t           *topic // nil: unknown topic
	partition   int32
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32
	cached      *sessionPart // nil without a session
	// Set by replicaFetchChecks in cluster mode (replication.go).
	replicated       bool            // the leader's checks ran: code replaces the epoch-0 check
	code             int16           // the leader's refusal, 0 if none
	follower         bool            // a follower's fetch: read to the log end
	lastFetchedEpoch int32           // v12 LastFetchedEpoch of a full fetch; -1 otherwise
	logStart         int64           // a follower's log start (LogStartOffset of a full fetch); -1 otherwise
	diverging        *divergingEpoch // the follower's log diverged: answer this, no records
	throttled        bool            // a throttled replica's fetch: its bytes charge the leader's throttle
	throttleSkip     bool            // ... and the throttle is overdrawn: no records
}

func handleFetch(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FetchRequest)
	var (
		sess        *fetchSession
		incremental bool
	)
	if req.Version >= 7 {
		switch {
		case req.SessionEpoch == -1: // sessionless full fetch; closes a named session
			if req.SessionID != 0 {
				s.sessions.remove(req.SessionID)
			}
		case req.SessionEpoch == 0: // full fetch creating a session
			if req.SessionID != 0 {
				s.sessions.remove(req.SessionID)
			}
			sess = s.sessions.create(s.clock.Now())
		default: // incremental
			sess = s.sessions.get(req.SessionID)
			if sess == nil {
				return &fetchReply{version: req.Version, errorCode: kerr.FetchSessionIDNotFound.Code}, nil
			}
			incremental = true
		}
	}
	if sess != nil {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		sess.lastUsed.Store(s.clock.Now().UnixNano())
		if incremental && sess.epoch != req.SessionEpoch {
			return &fetchReply{version: req.Version, errorCode: kerr.InvalidFetchSessionEpoch.Code, sessionID: sess.id}, nil
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				sess.upsert(sessionKey{rt.Topic, rp.Partition}, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch)
			}
		}
		if incremental {
			for _, ft := range req.ForgottenTopics {
				for _, p := range ft.Partitions {
					sess.forget(sessionKey{ft.Topic, p})
				}
			}
		}
		sess.epoch = nextEpoch(req.SessionEpoch)
	}
	targets := fetchTargets(s, req, sess, incremental)
	var throttledUntil time.Time
	if s.replicas != nil {
		throttledUntil = replicaFetchChecks(s, req.ReplicaID, targets)
	}
	maxWait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	deadline := s.clock.Now().Add(maxWait)
	if !throttledUntil.IsZero() && throttledUntil.Before(deadline) {
		deadline = throttledUntil // a throttled partition may be served then
	}
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		rep, changed, total, anyErr := readTargets(rc, req, targets)
		if anyErr || maxWait <= 0 || total >= int64(req.MinBytes) || !s.clock.Now().Before(deadline) || rc.ctx.Err() != nil {
			if s.replicas != nil {
				chargeLeaderThrottle(s, rep, targets)
			}
			if sess != nil {
				rep.sessionID = sess.id
				rep.filterSession(targets, incremental)
			}
			return rep, nil
		}
		rep.release()
		if timer == nil {
			timer = s.clock.NewTimer(deadline.Sub(s.clock.Now()))
		} else {
			timer.Reset(deadline.Sub(s.clock.Now()))
		}
		s.longPolls.Add(1)
		waitAny(rc.ctx, changed, timer.C())
		s.longPolls.Add(-1)
	}
}

// fetchTargets lists the partitions to read: the request's (full fetch) or
// the session's (incremental), resolved against the registry once.
func fetchTargets(s *Server, req *kmsg.FetchRequest, sess *fetchSession, incremental bool) []fetchTarget {
	var out []fetchTarget
	resolved := map[string]*topic{}
	resolve := func(name string) *topic {
		t, ok := resolved[name]
		if !ok {
			t, _ = s.topics.get(name)
			resolved[name] = t
		}
		return t
	}
	if incremental {
		for _, p := range sess.order {
			out = append(out, fetchTarget{topicName: p.key.topic, t: resolve(p.key.topic), partition: p.key.partition,
				fetchOffset: p.fetchOffset, maxBytes: p.maxBytes, leaderEpoch: p.leaderEpoch, cached: p, lastFetchedEpoch: -1, logStart: -1})
		}
		return out
	}
	seen := map[sessionKey]int{} // partition -> its index in out
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			key := sessionKey{rt.Topic, rp.Partition}
			if i, dup := seen[key]; dup { // as Kafka: the last mention counts, at the first one's place
				out[i].fetchOffset, out[i].maxBytes, out[i].leaderEpoch = rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch
				out[i].lastFetchedEpoch, out[i].logStart = lastFetchedEpoch(req, &rp), rp.LogStartOffset
				continue
			}
			seen[key] = len(out)
			ft := fetchTarget{topicName: rt.Topic, t: resolve(rt.Topic), partition: rp.Partition,
				fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch,
				lastFetchedEpoch: lastFetchedEpoch(req, &rp), logStart: rp.LogStartOffset}
			if sess != nil {
				ft.cached = sess.parts[key]
			}
			out = append(out, ft)
		}
	}
	return out
}

// lastFetchedEpoch is a partition's LastFetchedEpoch, -1 before v12 (where
// the field does not exist).
func lastFetchedEpoch(req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition) int32 {
	if req.Version < 12 {
		return -1
	}
	return rp.LastFetchedEpoch
}

// readTargets reads every target once. It returns the answer (holding the
// regions read), the partitions' change channels to wait on, the record
// bytes found and whether some partition has an error.
func readTargets(rc *requestContext, req *kmsg.FetchRequest, targets []fetchTarget) (*fetchReply, []<-chan struct{}, int64, bool) {
	var changed []<-chan struct{}
	total, anyErr := int64(0), false
	answerMax := min(int64(max(req.MaxBytes, 0)), rc.conn.s.cfg.FetchMaxBytes, maxFetchAnswerRecords)
	rep := &fetchReply{version: req.Version}
	for _, w := range targets {
		fp := fetchPartition{partition: w.partition, hw: -1, logStart: -1, lastStable: -1,
			preferredRead: -1, fetchOffset: w.fetchOffset, topicName: w.topicName}
		part, pcode := rc.conn.s.leaderPartition(w.t, w.partition)
		switch {
		case pcode != 0:
			fp.code = pcode
		case w.code != 0:
			fp.code = w.code
		case !w.replicated && rc.conn.s.leaderEpochCode(w.t, w.partition, w.leaderEpoch) != 0:
			fp.code = rc.conn.s.leaderEpochCode(w.t, w.partition, w.leaderEpoch)
		case w.throttleSkip:
			// The leader's replication throttle is overdrawn: offsets only.
			fp.hw, fp.logStart = part.log.HighWatermark(), part.log.LogStartOffset()
			_, fp.lastStable = fetchBound(part.log, req.IsolationLevel, fp.hw)
		case w.diverging != nil:
			// No records: the follower cuts its log first. Answered at once.
			fp.hw, fp.logStart = part.log.HighWatermark(), part.log.LogStartOffset()
			_, fp.lastStable = fetchBound(part.log, req.IsolationLevel, fp.hw)
			fp.diverging = w.diverging
			anyErr = true
		default:
			l := part.log
			changed = append(changed, l.Changed())
			fp.hw, fp.logStart = l.HighWatermark(), l.LogStartOffset()
			bound, lastStable := fetchBound(l, req.IsolationLevel, fp.hw)
			if w.follower {
				bound = replicaReadBound
			}
			fp.lastStable = lastStable
			remaining := answerMax - total
			if total > 0 && remaining <= 0 {
				break // answer full; report offsets only
			}
			limit := max(min(int64(w.maxBytes), remaining), 1)
			reg, err := l.Read(w.fetchOffset, int(limit), bound)
			if err != nil {
				fp.code = readErrorCode(err)
				if fp.code == kerr.KafkaStorageError.Code {
					rc.logger.Error("read", "topic", w.topicName, "partition", w.partition, "offset", w.fetchOffset, "err", err)
				}
				break
			}
			n := reg.Len()
			if n == 0 || (total > 0 && n > limit) || total+n > maxFetchAnswerRecords {
				_ = reg.Close()
				break
			}
			fp.region = reg
			total += n
			if err := fp.fillAborted(l, req.IsolationLevel); err != nil {
				fp.code = readErrorCode(err)
			}
		}
		if fp.code != 0 {
			anyErr = true
		}
		if k := len(rep.topics); k == 0 || rep.topics[k-1].name != w.topicName {
			rep.topics = append(rep.topics, fetchTopic{name: w.topicName})
		}
		last := &rep.topics[len(rep.topics)-1]
		last.parts = append(last.parts, fp)
	}
	return rep, changed, total, anyErr
}

// filterSession records in the session what this answer tells the client
// and, for an incremental fetch, drops the partitions with nothing new.
// targets and the answer's partitions are in the same order.
func (r *fetchReply) filterSession(targets []fetchTarget, incremental bool) {
	i := 0
	var topics []fetchTopic
	for _, ft := range r.topics {
		kept := ft.parts[:0]
		for _, fp := range ft.parts {
			w := targets[i]
			i++
			var records int64
			if fp.region != nil {
				records = fp.region.Len()
			}
			must := true
			if w.cached != nil {
				must = w.cached.mustRespond(fp.code, fp.hw, fp.logStart, records)
			}
			if incremental && !must {
				if fp.region != nil {
					_ = fp.region.Close()
				}
				continue
			}
			kept = append(kept, fp)
		}
		if len(kept) > 0 {
			ft.parts = kept
			topics = append(topics, ft)
		}
	}
	r.topics = topics
}

// waitAny blocks until one of chans is closed, timeout fires or ctx ends.
func waitAny(ctx context.Context, chans []<-chan struct{}, timeout <-chan time.Time) {
	switch len(chans) {
	case 0:
		select {
		case <-ctx.Done():
		case <-timeout:
		}
		return
	case 1:
		select {
		case <-ctx.Done():
		case <-timeout:
		case <-chans[0]:
		}
		return
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
	for _, ch := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	reflect.Select(cases)
}
