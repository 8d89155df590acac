// Package metadata is the broker's cluster metadata: which topics exist,
// their ids, partition counts and configuration overrides, and the blocks
// of producer ids handed out. The broker reads and changes it only through
// Store. Two implementations: FileStore, the single-node store in the data
// directory, and broker/cluster's Store, the cluster's in ZooKeeper
// (/brokers/topics, /config/topics, /latest_producer_id_block). One
// conformance suite (storetest) runs against both.
//
// A Store records decisions; it opens no partition. The broker's serving
// state (open partition logs) is built from it at start and follows each
// change the broker makes through it.
//
// # FileStore layout
//
//	<data dir>/
//	  topics.json        {"version":1,"topics":[{"name","id","partitions","configs"}...]}
//	  producer-ids.json  {"version":1,"next_block":N}
//	  users.json         {"version":1,"users":{NAME:{MECHANISM:CREDENTIAL}}} (users.go)
//	  acls.json          {"version":1,"acls":[{"resource_type","resource_name",...}]} (acls.go)
//	  topics.json.tmp    a write in progress (vfs.WriteFileAtomic); removed at open
//
// The files are replaced atomically and are durable when a method returns.
// A version other than 1 is refused, never guessed at.
package metadata

import (
	"crypto/rand"
	"errors"
	"fmt"
)

// Sentinel errors. Store implementations wrap them with %w.
var (
	// ErrTopicExists: CreateTopic of a name that is registered.
	ErrTopicExists = errors.New("metadata: topic already exists")
	// ErrUnknownTopic: DeleteTopic of a name that is not registered.
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	// ErrCorrupt: the stored metadata cannot be parsed; nothing is guessed.
	ErrCorrupt = errors.New("metadata: corrupt")
	// ErrStorage: the store could not be read or written.
	ErrStorage = errors.New("metadata: storage")
	// ErrExhausted: no producer ids are left.
	ErrExhausted = errors.New("metadata: producer ids exhausted")
)

// Topic is what the metadata records about one topic.
type Topic struct {
	Name       string
	ID         [16]byte // Kafka's topic id (a random UUID v4)
	Partitions int32
	Configs    map[string]string // topic-level overrides; nil = none
	// Replicas is the replica assignment in cluster mode: Replicas[p] lists
	// partition p's brokers, preferred leader first. nil in single-node
	// mode (FileStore does not keep it); a cluster Store given nil assigns
	// the partitions itself.
	Replicas [][]int32
}

// Store holds the metadata. Every method is safe for concurrent use and
// returns only when its change is durable (or has failed and changed
// nothing). Implementations: FileStore (single node) and broker/cluster's
// Store (ZooKeeper).
type Store interface {
	// Load returns the registered topics sorted by name. fresh is true when
	// the store was never written (a new data directory, or a lost
	// topics.json): the caller may then adopt partitions it finds on disk.
	Load() (topics []Topic, fresh bool, err error)
	// CreateTopic registers t; ErrTopicExists if t.Name is registered.
	CreateTopic(t Topic) error
	// UpdateTopic replaces a registered topic's partition count and
	// configs (t.ID must not change); ErrUnknownTopic if it is not registered.
	UpdateTopic(t Topic) error
	// DeleteTopic unregisters a topic; ErrUnknownTopic if it is not registered.
	DeleteTopic(name string) error
	// ReserveProducerIDs reserves the next n producer ids, never handed
	// out before (even across restarts), and returns the first.
	ReserveProducerIDs(n int64) (first int64, err error)
}

// MaxPartitions is the most partitions one topic may have.
const MaxPartitions = 1 << 16

// NewTopicID returns a random version-4 UUID.
func NewTopicID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func storageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStorage, fmt.Sprintf(format, args...))
}
