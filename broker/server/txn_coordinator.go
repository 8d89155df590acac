package server

// The transaction coordinator's wiring (broker/txn): its state in
// __transaction_state through the registry, its markers through the
// partition logs (and, for __consumer_offsets, the group coordinator, which
// makes a transaction's offsets visible at its COMMIT marker), its clock and
// its metrics. Lock order: a transaction's lock -> partition.mu, then the
// group coordinator's lock (never both at once here).

import (
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/audit"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/txn"
	"github.com/sluicehq/sluice/internal/mutate"
)

// txnStateStorage is txn.StateLog over the registry.
type txnStateStorage struct{ internalTopic }

func (st txnStateStorage) Partitions(create bool) (int32, error) { return st.ensure(create) }
func (st txnStateStorage) Append(p int32, batch []byte) error    { return st.append(p, batch) }
func (st txnStateStorage) Read(p int32, from int64, maxBytes int) ([]byte, error) {
	return st.read(p, from, maxBytes)
}
func (st txnStateStorage) MaxBatchBytes() int { return st.maxBatchBytes() }

// txnMarkers is txn.Markers over the partition logs.
type txnMarkers struct {
	reg    *registry
	groups *group.Coordinator
	crash  *markerCrash  // nil unless CrashAfterMarkersEnv is set
	audit  *audit.Broker // the broker audit tier (nil: off)
}

// CrashAfterMarkersEnv is a test-only hook of a binary built with the
// sluice_mutation tag (internal/mutate): set to n (>= 0) in such a broker
// process's environment, it makes the process kill itself (SIGKILL on
// Unix, no cleanup of any kind) when it is about to write its (n+1)th
// transaction marker: the crash between a transaction's prepare record
// and its last marker that the coordinator must complete on restart
// (broker/interop's TestSluiceKill9BetweenPrepareAndComplete). Unset or
// empty: no effect. A build without the tag never reads it.
const CrashAfterMarkersEnv = "SLUICE_TEST_TXN_CRASH_AFTER_MARKERS"

// markerCrash counts the markers written for CrashAfterMarkersEnv.
type markerCrash struct {
	after   int64
	written atomic.Int64
}

func markerCrashFromEnv(logger *slog.Logger) *markerCrash {
	if !mutate.Built { // a constant: production builds hold no hook
		return nil
	}
	v := os.Getenv(CrashAfterMarkersEnv)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		logger.Warn("ignoring a malformed test hook", "env", CrashAfterMarkersEnv, "value", v)
		return nil
	}
	logger.Warn("test hook armed: the broker kills itself before its next transaction marker past the limit", "env", CrashAfterMarkersEnv, "markers", n)
	return &markerCrash{after: n}
}

// maybeCrash kills the process if the marker about to be written is past the limit.
func (mc *markerCrash) maybeCrash() {
	if mc == nil || mc.written.Add(1) <= mc.after {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {} // the kill is asynchronous: write nothing more
}

func (m txnMarkers) part(tp txn.TopicPartition) (*partition, bool) {
	t, ok := m.reg.get(tp.Topic)
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.parts) {
		return nil, false
	}
	return t.parts[tp.Partition], true
}

func (m txnMarkers) PartitionExists(tp txn.TopicPartition) bool {
	_, ok := m.part(tp)
	return ok
}

func (m txnMarkers) WriteMarker(tp txn.TopicPartition, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	p, ok := m.part(tp)
	if !ok {
		return fmt.Errorf("%w: %s-%d", txn.ErrPartitionGone, tp.Topic, tp.Partition)
	}
	m.crash.maybeCrash()
	p.mu.Lock()
	_, err := p.log.AppendMarker(producerID, epoch, commit, coordinatorEpoch, 0)
	if err == nil {
		err = p.log.SetHighWatermark(p.log.LogEndOffset()) // single node: appended is committed
	}
	p.mu.Unlock()
	if errors.Is(err, plog.ErrInvalidProducerEpoch) {
		// The partition has seen a newer epoch of this producer: a newer
		// transaction already ended this one here.
		return nil
	}
	if err != nil {
		return err
	}
	if tp.Topic == group.OffsetsTopic {
		m.groups.CompleteTxn(tp.Partition, producerID, commit)
	}
	if m.audit != nil {
		m.audit.Marker(tp.Topic, tp.Partition, producerID, commit)
	}
	return nil
}

// openTxn builds the transaction coordinator from the broker's
// transaction.* properties and replays __transaction_state (completing the
// transactions a crash left half ended).
func openTxn(opts Options, cfg config.Broker, reg *registry, groups *group.Coordinator, pids *producerIDs, m *metrics, brokerAudit *audit.Broker) (*txn.Coordinator, error) {
	tc, err := cfg.Txn()
	if err != nil {
		return nil, err
	}
	c, err := txn.New(txn.Options{
		StateLog:           txnStateStorage{internalTopic{reg: reg, name: txn.StateTopic, partitions: int32(tc.StatePartitions)}},
		Markers:            txnMarkers{reg: reg, groups: groups, crash: markerCrashFromEnv(opts.Logger), audit: brokerAudit},
		AllocateProducerID: pids.allocate,
		Clock:              opts.Clock,
		Logger:             opts.Logger.With("component", "txn-coordinator"),
		StatePartitions:    int32(tc.StatePartitions),
		MaxTimeout:         time.Duration(tc.MaxTimeoutMs) * time.Millisecond,
		MaxPartitions:      int(tc.MaxPartitions),
		MaxTransactionIDs:  int(tc.MaxTransactionIDs),
	})
	if err != nil {
		return nil, fmt.Errorf("server: load transactions: %w", err)
	}
	m.reg.MustRegister(c.Collector())
	return c, nil
}

// txnLoop aborts timed-out transactions and retries unfinished ones every
// transaction.abort.timed.out.transaction.cleanup.interval.ms of the
// server's clock, until Shutdown.
func (s *Server) txnLoop() {
	defer s.retentionWG.Done()
	period := time.Duration(config.DefaultTxn().AbortCheckMs) * time.Millisecond
	if tc, err := s.cfg.Txn(); err == nil {
		period = time.Duration(tc.AbortCheckMs) * time.Millisecond
	}
	t := s.clock.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
			s.txn.Tick()
			t.Reset(period)
		}
	}
}
