package server

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
)

const (
	producerIDFile  = "producer-ids.json"
	producerIDBlock = 1000
)

// producerIDs hands out producer ids that never repeat, even across
// restarts: ids are taken from blocks, and the end of the current block is
// made durable before the first id of the block is handed out. A restart
// skips the rest of the block in use.
type producerIDs struct {
	store MetaStore

	mu       sync.Mutex // guards next and blockEnd
	next     int64
	blockEnd int64
}

type producerIDFileV1 struct {
	Version   int   `json:"version"`
	NextBlock int64 `json:"next_block"`
}

func openProducerIDs(store MetaStore) (*producerIDs, error) {
	p := &producerIDs{store: store}
	data, err := store.ReadFile(producerIDFile)
	switch {
	case isNotExist(err):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, producerIDFile, err)
	}
	var f producerIDFileV1
	if err := json.Unmarshal(data, &f); err != nil || f.Version != 1 || f.NextBlock < 0 {
		return nil, fmt.Errorf("%w: %s: cannot parse %q", ErrCorruptMeta, producerIDFile, data)
	}
	p.next, p.blockEnd = f.NextBlock, f.NextBlock
	return p, nil
}

// allocate returns a fresh producer id.
func (p *producerIDs) allocate() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.blockEnd {
		if p.blockEnd > math.MaxInt64-producerIDBlock {
			return 0, fmt.Errorf("%w: producer ids exhausted", ErrStorage)
		}
		end := p.next + producerIDBlock
		data, _ := json.Marshal(producerIDFileV1{Version: 1, NextBlock: end})
		if err := p.store.WriteFileAtomic(producerIDFile, data); err != nil {
			return 0, err
		}
		p.blockEnd = end
	}
	id := p.next
	p.next++
	return id, nil
}
