package server

import (
	"sync"

	"github.com/sluicehq/sluice/broker/metadata"
)

const producerIDBlock = 1000

// producerIDs hands out producer ids that never repeat, even across
// restarts: ids are taken from blocks reserved durably in the metadata
// store before the first id of a block is handed out. A restart skips the
// rest of the block in use.
type producerIDs struct {
	store metadata.Store

	mu       sync.Mutex // guards next and blockEnd
	next     int64
	blockEnd int64
}

func openProducerIDs(store metadata.Store) *producerIDs { return &producerIDs{store: store} }

// allocate returns a fresh producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.blockEnd {
		first, err := p.store.ReserveProducerIDs(producerIDBlock)
		if err != nil {
			return 0, metaErr(err)
		}
		p.next, p.blockEnd = first, first+producerIDBlock
	}
	id := p.next
	p.next++
	return id, nil
}
