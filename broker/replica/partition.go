package replica

import (
	"sync"
	"time"

	plog "github.com/sluicehq/sluice/broker/log"
)

// partition is one partition with a replica on this broker.
type partition struct {
	key partitionKey
	log *plog.Log

	mu sync.Mutex // Kafka's leaderIsrUpdateLock: role changes, leader appends and the HW move under it
	// Guarded by mu.
	state   State // the last applied state
	applied bool  // state is set: Role answers
	leader  bool
	epoch   int32 // leader epoch of the role played

	// Leader side.
	isr        []int32 // the ISR confirmed by the controller (state or AlterISR)
	version    int32   // state znode version of isr
	pendingISR []int32 // an ISR written by AlterISR, not yet confirmed; nil if none
	alterStale bool    // an AlterISR was refused (ErrStaleState): none until the next Apply
	epochStart int64   // log end when this leadership began
	followers  map[int32]*followerState
	changed    chan struct{} // closed at each role or ISR change

	// Follower side.
	fetching *fetchAssignment // nil: not fetching
}

// followerState is what the leader knows of one follower (Kafka's Replica).
type followerState struct {
	leo                int64 // the follower's log end: its last fetch offset; -1 unknown
	logStart           int64 // the follower's log start as its last fetch said; -1 unknown
	lastCaughtUp       time.Time
	lastFetch          time.Time
	lastFetchLeaderLEO int64 // the leader's log end at lastFetch
}

// fetchAssignment is a partition's place in a fetcher: the leader it
// follows in which epoch, and whether it still has to truncate.
type fetchAssignment struct {
	leader     int32
	epoch      int32
	truncating bool
	gen        uint64 // changes at each assignment; a fetcher's answer for another gen is dropped
}

var fetchGen struct {
	sync.Mutex
	n uint64
}

func nextGen() uint64 {
	fetchGen.Lock()
	defer fetchGen.Unlock()
	fetchGen.n++
	return fetchGen.n
}

func newPartition(key partitionKey, l *plog.Log) *partition {
	return &partition{key: key, log: l, changed: make(chan struct{})}
}

// notifyLocked wakes the waiters of WaitReplicated.
func (p *partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// hwISRLocked is the replica set the high watermark is the minimum over:
// the confirmed ISR and a member being added (Kafka's maximal ISR), so that
// the HW never counts on a replica that may not be in the ISR the controller
// elects from, and never passes one that is joining it.
func (p *partition) hwISRLocked() []int32 {
	ids := append([]int32(nil), p.isr...)
	for _, id := range p.pendingISR {
		found := false
		for _, x := range ids {
			if x == id {
				found = true
				break
			}
		}
		if !found {
			ids = append(ids, id)
		}
	}
	return ids
}
