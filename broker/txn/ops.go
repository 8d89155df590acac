package txn

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorCode maps an internal failure to the Kafka error code a client gets.
func (c *Coordinator) errorCode(op, id string, err error) int16 {
	switch {
	case errors.Is(err, ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	case errors.Is(err, ErrRecordTooLarge):
		c.logger.Warn(op+" refused: the transaction's state record is too large", "transactional_id", truncID(id), "err", err)
		return kerr.MessageTooLarge.Code
	case errors.Is(err, errTooManyIDs):
		c.logger.Warn(op+" refused: transaction.max.ids transactional ids are held", "limit", c.opts.MaxTransactionIDs)
		return kerr.InvalidRequest.Code
	}
	c.logger.Error(op, "transactional_id", truncID(id), "err", err)
	return kerr.CoordinatorNotAvailable.Code
}

// truncID keeps logs short whatever id a client sent.
func truncID(id string) string {
	if len(id) > 128 {
		return id[:128] + "..."
	}
	return id
}

func preparing(s kmsg.TransactionState) bool {
	return s == kmsg.TransactionStatePrepareCommit || s == kmsg.TransactionStatePrepareAbort || s == kmsg.TransactionStatePrepareEpochFence
}

// InitResult is InitProducerId's answer.
type InitResult struct {
	ProducerID int64
	Epoch      int16
	ErrorCode  int16
}

// InitProducerID serves InitProducerId for a transactional id: a new id
// gets a fresh producer id at epoch 0, a known one its epoch bumped (its
// ongoing transaction aborted first: the old producer is fenced). reqPID and
// reqEpoch (-1 unless the client recovers, KIP-360) must name the current
// producer, or its previous epoch (a retry, answered with the current one).
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, reqPID int64, reqEpoch int16) InitResult {
	fail := func(code int16) InitResult { return InitResult{ProducerID: -1, Epoch: -1, ErrorCode: code} }
	switch {
	case id == "" || len(id) > MaxTransactionalIDBytes:
		return fail(kerr.InvalidRequest.Code)
	case timeoutMs <= 0 || int64(timeoutMs) > c.opts.MaxTimeout.Milliseconds():
		return fail(kerr.InvalidTransactionTimeout.Code)
	}
	t, err := c.lookup(id, true)
	if err != nil {
		return fail(c.errorCode("init producer id", id, err))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.producerID < 0 {
		pid, err := c.opts.AllocateProducerID()
		if err != nil {
			c.forgetNew(t)
			return fail(c.errorCode("allocate a producer id", id, err))
		}
		next := t.clone()
		next.producerID, next.epoch, next.timeoutMs = pid, 0, timeoutMs
		if err := c.writeLocked(t, next); err != nil {
			c.forgetNew(t)
			return fail(c.errorCode("init producer id", id, err))
		}
		return InitResult{ProducerID: pid, Epoch: 0}
	}
	if reqPID >= 0 {
		current := reqPID == t.producerID && reqEpoch == t.epoch
		retry := t.lastEpoch >= 0 && reqEpoch == t.lastEpoch && (reqPID == t.producerID || reqPID == t.lastProducerID)
		switch {
		case retry && !current && !preparing(t.state) && t.state != kmsg.TransactionStateOngoing:
			return InitResult{ProducerID: t.producerID, Epoch: t.epoch}
		case !current:
			return fail(kerr.ProducerFenced.Code)
		}
	}
	switch {
	case preparing(t.state):
		if err := c.finishLocked(t); err != nil {
			return fail(kerr.ConcurrentTransactions.Code)
		}
	case t.state == kmsg.TransactionStateOngoing:
		if err := c.abortLocked(t, true); err != nil {
			return fail(kerr.ConcurrentTransactions.Code)
		}
	}
	next := t.clone()
	if t.epoch >= math.MaxInt16-1 {
		pid, err := c.opts.AllocateProducerID()
		if err != nil {
			return fail(c.errorCode("allocate a producer id", id, err))
		}
		next.lastProducerID, next.producerID, next.epoch, next.lastEpoch = t.producerID, pid, 0, -1
	} else {
		next.epoch, next.lastEpoch = t.epoch+1, t.epoch
	}
	next.timeoutMs, next.state, next.startMs = timeoutMs, kmsg.TransactionStateEmpty, -1
	clear(next.partitions)
	if err := c.writeLocked(t, next); err != nil {
		return fail(c.errorCode("init producer id", id, err))
	}
	return InitResult{ProducerID: next.producerID, Epoch: next.epoch}
}

// checkProducerLocked checks a request's producer id and epoch against t.
func checkProducerLocked(t *transaction, pid int64, epoch int16) int16 {
	switch {
	case pid != t.producerID:
		return kerr.InvalidProducerIDMapping.Code
	case epoch != t.epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// existing returns id's transaction or the code for an unknown one.
func (c *Coordinator) existing(op, id string) (*transaction, int16) {
	if id == "" || len(id) > MaxTransactionalIDBytes {
		return nil, kerr.InvalidRequest.Code
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return nil, c.errorCode(op, id, err)
	}
	if t == nil {
		return nil, kerr.InvalidProducerIDMapping.Code
	}
	return t, 0
}

// AddPartitions serves AddPartitionsToTxn (and AddOffsetsToTxn, whose
// partition is the group's of __consumer_offsets): it returns a code per
// distinct partition of tps. The transaction becomes Ongoing.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, tps []TopicPartition) map[TopicPartition]int16 {
	out := make(map[TopicPartition]int16, min(len(tps), c.opts.MaxPartitions+1))
	all := func(code int16) map[TopicPartition]int16 {
		for _, tp := range tps {
			out[tp] = code
		}
		return out
	}
	if len(tps) > c.opts.MaxPartitions {
		c.logger.Warn("add partitions to transaction refused: more than transaction.max.partitions", "transactional_id", truncID(id), "partitions", len(tps), "limit", c.opts.MaxPartitions)
		return all(kerr.InvalidRequest.Code)
	}
	t, code := c.existing("add partitions to transaction", id)
	if code != 0 {
		return all(code)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := checkProducerLocked(t, pid, epoch); code != 0 {
		return all(code)
	}
	if preparing(t.state) {
		if err := c.finishLocked(t); err != nil {
			return all(kerr.ConcurrentTransactions.Code)
		}
	}
	if t.state == kmsg.TransactionStateDead {
		return all(kerr.InvalidTxnState.Code)
	}
	var added []TopicPartition
	unknown := false
	for _, tp := range tps {
		if _, done := out[tp]; done {
			continue
		}
		out[tp] = 0
		if !c.opts.Markers.PartitionExists(tp) {
			out[tp], unknown = kerr.UnknownTopicOrPartition.Code, true
			continue
		}
		if _, ok := t.partitions[tp]; !ok {
			added = append(added, tp)
		}
	}
	if unknown {
		for tp, code := range out {
			if code == 0 {
				out[tp] = kerr.OperationNotAttempted.Code
			}
		}
		return out
	}
	if len(t.partitions)+len(added) > c.opts.MaxPartitions {
		c.logger.Warn("add partitions to transaction refused: the transaction would hold more than transaction.max.partitions", "transactional_id", truncID(id), "limit", c.opts.MaxPartitions)
		return all(kerr.InvalidRequest.Code)
	}
	if len(added) == 0 && t.state == kmsg.TransactionStateOngoing {
		return out
	}
	next := t.clone()
	if t.state != kmsg.TransactionStateOngoing {
		clear(next.partitions)
		next.state, next.startMs = kmsg.TransactionStateOngoing, c.clock.Now().UnixMilli()
	}
	for _, tp := range added {
		next.partitions[tp] = struct{}{}
	}
	if err := c.writeLocked(t, next); err != nil {
		return all(c.errorCode("add partitions to transaction", id, err))
	}
	return out
}

// Verify answers AddPartitionsToTxn v4+ with verify_only: per partition,
// 0 if it is in the producer's ongoing transaction, else INVALID_TXN_STATE.
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tps []TopicPartition) map[TopicPartition]int16 {
	out := make(map[TopicPartition]int16, min(len(tps), c.opts.MaxPartitions+1))
	t, code := c.existing("verify transaction", id)
	if code == 0 {
		t.mu.Lock()
		defer t.mu.Unlock()
		code = checkProducerLocked(t, pid, epoch)
	}
	for _, tp := range tps {
		if len(out) > c.opts.MaxPartitions {
			code = kerr.InvalidRequest.Code
		}
		out[tp] = code
		if code == 0 {
			if _, ok := t.partitions[tp]; !ok || t.state != kmsg.TransactionStateOngoing {
				out[tp] = kerr.InvalidTxnState.Code
			}
		}
	}
	return out
}

// Guard runs fn, a transactional append of producer pid at epoch to tp,
// only if tp is in the producer's ongoing transaction (KIP-890 part 1), and
// under the transaction's lock, so that no marker is written between the
// check and the append. It returns fn's code, or why fn was not run:
// INVALID_PRODUCER_ID_MAPPING (unknown id or another producer), PRODUCER_FENCED
// (an older epoch), INVALID_TXN_STATE (the partition is not in an ongoing
// transaction).
func (c *Coordinator) Guard(id string, pid int64, epoch int16, tp TopicPartition, fn func() int16) int16 {
	t, code := c.existing("verify a transactional produce", id)
	if code != 0 {
		return code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := checkProducerLocked(t, pid, epoch); code != 0 {
		return code
	}
	if _, ok := t.partitions[tp]; !ok || t.state != kmsg.TransactionStateOngoing {
		return kerr.InvalidTxnState.Code
	}
	return fn()
}

// EndTxn serves EndTxn: an ongoing transaction is prepared (written), its
// markers written to every partition, and completed. A retry of an ended
// transaction's EndTxn with the same outcome is answered 0.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) int16 {
	t, code := c.existing("end transaction", id)
	if code != 0 {
		return code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if code := checkProducerLocked(t, pid, epoch); code != 0 {
		return code
	}
	switch t.state {
	case kmsg.TransactionStateOngoing:
		next := t.clone()
		next.state = kmsg.TransactionStatePrepareAbort
		if commit {
			next.state = kmsg.TransactionStatePrepareCommit
		}
		if err := c.writeLocked(t, next); err != nil {
			return c.errorCode("end transaction", id, err)
		}
		if err := c.completeLocked(t); err != nil {
			c.logger.Warn("writing transaction markers failed; retried later", "transactional_id", truncID(id), "err", err)
		}
		return 0
	case kmsg.TransactionStateCompleteCommit:
		return okIf(commit)
	case kmsg.TransactionStateCompleteAbort:
		return okIf(!commit)
	case kmsg.TransactionStatePrepareCommit:
		if !commit {
			return kerr.InvalidTxnState.Code
		}
		return kerr.ConcurrentTransactions.Code
	case kmsg.TransactionStatePrepareAbort:
		if commit {
			return kerr.InvalidTxnState.Code
		}
		return kerr.ConcurrentTransactions.Code
	}
	return kerr.InvalidTxnState.Code
}

func okIf(ok bool) int16 {
	if ok {
		return 0
	}
	return kerr.InvalidTxnState.Code
}

// abortLocked aborts t's ongoing transaction: PrepareAbort (with the epoch
// bumped if fence, so the partitions refuse the old producer), markers,
// CompleteAbort.
func (c *Coordinator) abortLocked(t *transaction, fence bool) error {
	next := t.clone()
	if fence && t.epoch < math.MaxInt16 {
		next.epoch, next.lastEpoch = t.epoch+1, t.epoch
	}
	next.state = kmsg.TransactionStatePrepareAbort
	if err := c.writeLocked(t, next); err != nil {
		return err
	}
	return c.completeLocked(t)
}

// finishLocked completes a transaction in a prepare state.
func (c *Coordinator) finishLocked(t *transaction) error {
	if t.state == kmsg.TransactionStatePrepareEpochFence {
		return c.abortLocked(t, false)
	}
	return c.completeLocked(t)
}

// completeLocked writes the markers of t (in PrepareCommit or PrepareAbort)
// to each of its partitions and then its Complete state.
func (c *Coordinator) completeLocked(t *transaction) error {
	commit := t.state == kmsg.TransactionStatePrepareCommit
	coordEpoch, ok := c.opts.Ownership.Owns(t.partition)
	if !ok {
		return ErrNotCoordinator
	}
	for _, tp := range t.sortedPartitions() {
		err := c.opts.Markers.WriteMarker(tp, t.producerID, t.epoch, commit, coordEpoch)
		if errors.Is(err, ErrPartitionGone) {
			c.logger.Info("transaction marker skipped: the partition is gone", "transactional_id", truncID(t.id), "topic", tp.Topic, "partition", tp.Partition)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: marker to %s-%d: %w", ErrStorage, tp.Topic, tp.Partition, err)
		}
	}
	next := t.clone()
	next.state = kmsg.TransactionStateCompleteAbort
	if commit {
		next.state = kmsg.TransactionStateCompleteCommit
	}
	clear(next.partitions)
	return c.writeLocked(t, next)
}

// Tick aborts the transactions open longer than their timeout (the epoch
// bumped: their producer is fenced) and retries the completion of those
// whose markers could not be written. The broker calls it every
// transaction.abort.timed.out.transaction.cleanup.interval.ms; tests after
// advancing their clock.
func (c *Coordinator) Tick() {
	now := c.clock.Now().UnixMilli()
	for _, t := range c.all() {
		t.mu.Lock()
		switch {
		case preparing(t.state):
			if err := c.finishLocked(t); err != nil {
				c.logger.Warn("completing a transaction failed; retried later", "transactional_id", truncID(t.id), "err", err)
			}
		case t.state == kmsg.TransactionStateOngoing && t.startMs >= 0 && now-t.startMs > int64(t.timeoutMs):
			c.logger.Info("aborting a transaction open past its timeout", "transactional_id", truncID(t.id), "producer_id", t.producerID,
				"open_ms", now-t.startMs, "timeout_ms", t.timeoutMs)
			err := c.abortLocked(t, true)
			if err != nil {
				c.logger.Warn("aborting a timed out transaction failed; retried later", "transactional_id", truncID(t.id), "err", err)
			}
			// Counted once the abort is decided (PrepareAbort written):
			// markers that fail are written by a later tick, from the
			// prepare state, which does not count it again.
			if err == nil || t.state == kmsg.TransactionStatePrepareAbort {
				c.timedOut.Add(1)
			}
		}
		t.mu.Unlock()
	}
}
