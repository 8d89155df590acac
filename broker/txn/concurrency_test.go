package txn

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// partitionEvent is one write to a partition: transactional data appended
// through Guard, or a marker.
type partitionEvent struct {
	marker     bool
	producerID int64
	epoch      int16
}

// eventLog is the order of writes per partition, as a partition's log
// would hold them.
type eventLog struct {
	mu  sync.Mutex
	seq map[TopicPartition][]partitionEvent
}

func (l *eventLog) add(tp TopicPartition, e partitionEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq[tp] = append(l.seq[tp], e)
}

// TestNoHangingTransaction (KIP-890 part 1) races, per transactional id, a
// producer that begins, appends and ends transactions, late appends
// (produce requests delayed past their EndTxn), a second instance of the
// producer that fences the first, and the timeout sweep with the clock
// moving. Once every transaction has ended, each partition's writes must
// not end in a hanging transaction: every append is followed by a marker
// of its producer at an epoch at least its own.
func TestNoHangingTransaction(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	events := &eventLog{seq: map[TopicPartition][]partitionEvent{}}
	f := newFixture(t, nil)
	// Markers go to the event log too (under the markers' lock: the order
	// is the order of writes).
	f.opts.Markers = eventMarkers{f.markers, events}
	f.restart()

	tps := []TopicPartition{a0, a1, a2, b0, b1}
	const ids, rounds = 4, 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	appended := make([]int, ids)
	for i := 0; i < ids; i++ {
		id := fmt.Sprintf("racer-%d", i)
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() { // the producer
			defer wg.Done()
			var late sync.WaitGroup
			for r := 0; r < rounds; r++ {
				res := f.c.InitProducerID(id, 50, -1, -1)
				if res.ErrorCode != 0 {
					continue
				}
				mine := tps[:1+rng.IntN(len(tps))]
				if codes := f.c.AddPartitions(id, res.ProducerID, res.Epoch, mine); codes[mine[0]] != 0 {
					continue
				}
				for _, tp := range mine {
					appendTo(f.c, events, id, res, tp, &appended[i])
				}
				// Late appends: sent before EndTxn, arriving around or after it.
				for k := 0; k < 3; k++ {
					tp := mine[rng.IntN(len(mine))]
					late.Add(1)
					go func() {
						defer late.Done()
						appendTo(f.c, events, id, res, tp, nil)
					}()
				}
				f.c.EndTxn(id, res.ProducerID, res.Epoch, rng.IntN(2) == 0)
			}
			late.Wait()
		}()
		wg.Add(1)
		fencerRng := rand.New(rand.NewPCG(seed, uint64(ids+i)))
		go func() { // a second instance of the producer, fencing the first now and then
			defer wg.Done()
			rng := fencerRng
			for r := 0; r < rounds/3; r++ {
				f.c.InitProducerID(id, 50, -1, -1)
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
		}()
	}
	sweeper := make(chan struct{})
	go func() { // the timeout sweep
		defer close(sweeper)
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.clock.Advance(20 * time.Millisecond)
			f.c.Tick()
			time.Sleep(100 * time.Microsecond)
		}
	}()
	wg.Wait()
	close(stop)
	<-sweeper
	// End whatever is still open: a new instance aborts it.
	for i := 0; i < ids; i++ {
		if r := f.c.InitProducerID(fmt.Sprintf("racer-%d", i), 50, -1, -1); r.ErrorCode != 0 {
			t.Fatalf("final init of racer-%d: code %d", i, r.ErrorCode)
		}
	}
	if st := f.c.Stats(); st.Open != 0 {
		t.Fatalf("transactions still open: %+v", st)
	}

	events.mu.Lock()
	defer events.mu.Unlock()
	total := 0
	for tp, seq := range events.seq {
		for i, e := range seq {
			if e.marker {
				continue
			}
			total++
			closed := false
			for _, later := range seq[i+1:] {
				if later.marker && later.producerID == e.producerID && later.epoch >= e.epoch {
					closed = true
					break
				}
			}
			if !closed {
				t.Fatalf("%v: the append at write %d (producer %d, epoch %d) is never closed by a marker: a hanging transaction (seed %d)", tp, i, e.producerID, e.epoch, seed)
			}
		}
	}
	if total == 0 {
		t.Fatal("no append went through: the race tested nothing")
	}
	t.Logf("%d guarded appends, all closed by a marker; first producer's on-time appends: %d", total, appended[0])
}

// appendTo appends one record of id's producer to tp through Guard.
func appendTo(c *Coordinator, events *eventLog, id string, r InitResult, tp TopicPartition, n *int) {
	c.Guard(id, r.ProducerID, r.Epoch, tp, func() int16 {
		events.add(tp, partitionEvent{producerID: r.ProducerID, epoch: r.Epoch})
		if n != nil {
			*n++
		}
		return 0
	})
}

// eventMarkers is memMarkers that also records each marker in the event log.
type eventMarkers struct {
	*memMarkers
	events *eventLog
}

func (m eventMarkers) WriteMarker(tp TopicPartition, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error {
	if err := m.memMarkers.WriteMarker(tp, producerID, epoch, commit, coordinatorEpoch); err != nil {
		return err
	}
	m.events.add(tp, partitionEvent{marker: true, producerID: producerID, epoch: epoch})
	return nil
}
