package cluster

import (
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"
)

// watchSet keeps at most one pending ZooKeeper watch per key (a path and
// kind) and turns every watch that fires into one wake-up on Wake. A
// reader arms its watches before it reads, so a change made after the read
// always fires one of them. The client closes every watch when the session
// ends, which also wakes the reader.
type watchSet struct {
	wake chan struct{} // capacity 1: wake-ups coalesce

	mu    sync.Mutex // guards armed
	armed map[string]bool
}

func newWatchSet() *watchSet {
	return &watchSet{wake: make(chan struct{}, 1), armed: map[string]bool{}}
}

// Wake receives a value after any armed watch fired (or kick was called).
func (w *watchSet) Wake() <-chan struct{} { return w.wake }

func (w *watchSet) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// arm calls set (one of the client's *W calls) unless a watch for key is
// pending. ErrNoNode from set is returned to the caller, with no watch armed.
func (w *watchSet) arm(key string, set func() (<-chan zk.Event, error)) error {
	w.mu.Lock()
	if w.armed[key] {
		w.mu.Unlock()
		return nil
	}
	w.armed[key] = true
	w.mu.Unlock()
	ch, err := set()
	if err != nil {
		w.mu.Lock()
		delete(w.armed, key)
		w.mu.Unlock()
		return err
	}
	go func() {
		<-ch
		w.mu.Lock()
		delete(w.armed, key)
		w.mu.Unlock()
		w.kick()
	}()
	return nil
}

// children arms a child watch on path.
func (w *watchSet) children(c *zk.Conn, path string) error {
	return w.arm("c"+path, func() (<-chan zk.Event, error) {
		_, _, ch, err := c.ChildrenW(path)
		return ch, err
	})
}

// data arms a watch on path's data and existence (ExistsW: it fires on a
// create too, so it also serves a node that does not exist yet).
func (w *watchSet) data(c *zk.Conn, path string) error {
	return w.arm("d"+path, func() (<-chan zk.Event, error) {
		_, _, ch, err := c.ExistsW(path)
		return ch, err
	})
}

func isNoNode(err error) bool { return errors.Is(err, zk.ErrNoNode) }
