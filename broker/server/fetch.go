package server

// Fetch (key 1), versions 4-12.
//
// Long poll: the answer waits until MinBytes of records are available, an
// error occurs, MaxWaitMillis passes, the client goes away or the server
// shuts down, woken by each partition log's Changed() channel (no polling).
// MaxBytes and PartitionMaxBytes are soft as in Kafka: the first batch of the
// first partition with data is returned whole even when larger; later
// partitions are limited by what remains. Reads stop at the high watermark
// (= log end offset on a single node). A fetch offset outside
// [log start, log end] is OFFSET_OUT_OF_RANGE. The answer carries the high
// watermark, last stable offset (= high watermark, no transactions) and the
// log start offset. Zero copy: the response frame is encoded here (fetch_encode.go)
// around the records fields, and each record range goes out with
// Region.WriteTo, i.e. sendfile(2) from the segment file to the socket.
//
// Deviations from Kafka: incremental fetch sessions (KIP-227) are not
// offered (SessionID 0 in every answer, so clients send full fetches; a
// request naming a session gets FETCH_SESSION_ID_NOT_FOUND); IsolationLevel
// is ignored (no transactions: nothing is aborted); RackID / preferred read
// replica do not apply (always -1); ForgottenTopics are ignored.

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
)

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
}

// fetchTopic is one topic's part of a Fetch answer.
type fetchTopic struct {
	name  string
	parts []fetchPartition
}

func handleFetch(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FetchRequest)
	if req.Version >= 7 && req.SessionID != 0 {
		return &fetchReply{version: req.Version, errorCode: kerr.FetchSessionIDNotFound.Code}, nil
	}
	// Resolve the requested partitions once.
	type want struct {
		t  *topic
		rp *kmsg.FetchRequestTopicPartition
	}
	var wants [][]want
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		t, _ := s.topics.get(rt.Topic)
		ws := make([]want, len(rt.Partitions))
		for pi := range rt.Partitions {
			ws[pi] = want{t: t, rp: &rt.Partitions[pi]}
		}
		wants = append(wants, ws)
	}
	maxWait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	deadline := time.Now().Add(maxWait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var changed []<-chan struct{}
		total, anyErr := int64(0), false
		rep := &fetchReply{version: req.Version}
		for ti, ws := range wants {
			ft := fetchTopic{name: req.Topics[ti].Topic}
			for _, w := range ws {
				fp := fetchPartition{partition: w.rp.Partition, hw: -1, logStart: -1, lastStable: -1,
					preferredRead: -1, fetchOffset: w.rp.FetchOffset, topicName: ft.name}
				switch {
				case w.t == nil || w.rp.Partition < 0 || int(w.rp.Partition) >= len(w.t.parts):
					fp.code = kerr.UnknownTopicOrPartition.Code
				case w.rp.CurrentLeaderEpoch > 0:
					fp.code = kerr.UnknownLeaderEpoch.Code
				default:
					l := w.t.parts[w.rp.Partition].log
					changed = append(changed, l.Changed())
					fp.hw, fp.logStart = l.HighWatermark(), l.LogStartOffset()
					fp.lastStable = fp.hw
					remaining := int64(req.MaxBytes) - total
					if req.Version < 3 || req.MaxBytes <= 0 {
						remaining = 1 << 62
					}
					if total > 0 && remaining <= 0 {
						break // response full; report offsets only
					}
					limit := int64(w.rp.PartitionMaxBytes)
					limit = min(limit, remaining)
					if limit < 1 {
						limit = 1
					}
					reg, err := l.Read(w.rp.FetchOffset, int(min(limit, 1<<31-1)), fp.hw)
					if err != nil {
						fp.code = readErrorCode(err)
						if fp.code == kerr.KafkaStorageError.Code {
							rc.logger.Error("read", "topic", ft.name, "partition", fp.partition, "offset", w.rp.FetchOffset, "err", err)
						}
						break
					}
					n := reg.Len()
					if n == 0 || (total > 0 && n > limit) {
						_ = reg.Close()
						break
					}
					fp.region = reg
					total += n
				}
				if fp.code != 0 {
					anyErr = true
				}
				ft.parts = append(ft.parts, fp)
			}
			rep.topics = append(rep.topics, ft)
		}
		if anyErr || maxWait <= 0 || total >= int64(req.MinBytes) || !time.Now().Before(deadline) || rc.ctx.Err() != nil {
			return rep, nil
		}
		rep.release()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		} else {
			timer.Reset(time.Until(deadline))
		}
		s.longPolls.Add(1)
		waitAny(rc.ctx, changed, timer.C)
		s.longPolls.Add(-1)
	}
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
