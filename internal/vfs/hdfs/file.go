package hdfs

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// dialGate serializes a client's operations that may dial a DataNode.
// colinmarc/hdfs (v2.4.0) keeps the data encryption key of a protected data
// transfer in the Client without a lock: wrapDatanodeDial reads it and,
// while it is nil, asks the NameNode and stores the answer. With
// dfs.data.transfer.protection set and no data encryption the NameNode's
// answer is nil, so every dial writes it again: concurrent dials race (the
// race detector caught it in a Kerberized load with several workers). Then
// (always) every operation that may dial runs alone. Without protection the
// key is needed only with dfs.encrypt.data.transfer, is never nil once
// fetched, and only the dials until one succeeded run alone (done's store
// and load order that first write before every later read).
type dialGate struct {
	always bool
	mu     sync.Mutex
	done   atomic.Bool
}

// do runs op, alone when it could race another dial.
func (g *dialGate) do(op func() error) error {
	if !g.always && g.done.Load() {
		return op()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	err := op()
	if err == nil {
		g.done.Store(true)
	}
	return err
}

// writer is a file being written: append-only.
type writer struct {
	w       *hdfs.FileWriter
	name    string
	opts    *Options
	gate    *dialGate
	block   int64 // the file's block size: a Write that starts a block dials
	written int64
}

// Write skips empty writes: the client allocates a block (addBlock) on its
// first Write even for zero bytes, no DataNode ever receives that block, and
// the NameNode then never completes the file (Close reports "replication in
// progress" until the close timeout). With no Write, Close completes an
// empty file with no block at once.
func (f *writer) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if f.block <= 0 || f.written%f.block == 0 || f.written/f.block != (f.written+int64(len(b)))/f.block {
		err = f.gate.do(func() (err error) { n, err = f.w.Write(b); return err })
	} else {
		n, err = f.w.Write(b)
	}
	f.written += int64(n)
	return n, err
}

// WriteAt works only at the end of what was written.
func (f *writer) WriteAt(b []byte, off int64) (int, error) {
	if off != f.written {
		return 0, unsupported("write at", f.name)
	}
	return f.Write(b)
}

func (f *writer) Read([]byte) (int, error)          { return 0, unsupported("read", f.name) }
func (f *writer) ReadAt([]byte, int64) (int, error) { return 0, unsupported("read", f.name) }
func (f *writer) Truncate(int64) error              { return unsupported("truncate", f.name) }
func (f *writer) Size() (int64, error)              { return f.written, nil }

// Sync sends what was written down the pipeline without waiting for the
// DataNodes' acknowledgements; only Close makes the data durable.
func (f *writer) Sync() error { return f.w.Flush() }

// Close completes the file, retrying with backoff while the NameNode says
// the last block is still replicating (as the Java client does).
func (f *writer) Close() error {
	deadline := f.opts.Clock.Now().Add(f.opts.CloseTimeout)
	wait := 10 * time.Millisecond
	for {
		err := f.w.Close()
		if err == nil || !hdfs.IsErrReplicating(err) {
			return err
		}
		if f.opts.Clock.Now().After(deadline) {
			return fmt.Errorf("hdfs: close of %s still replicating after %s: %w", f.name, f.opts.CloseTimeout, err)
		}
		<-f.opts.Clock.NewTimer(wait).C() // a backoff against the NameNode, not a wait for a test event
		if wait < time.Second {
			wait *= 2
		}
	}
}

// reader is a file opened for reading. The client's ReadAt seeks the
// reader, so both are serialized and ReadAt puts the position back: Read
// and ReadAt do not disturb each other, as vfs.File promises.
type reader struct {
	mu   sync.Mutex // guards r's position
	r    *hdfs.FileReader
	name string
	gate *dialGate
}

func (f *reader) Read(b []byte) (n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err = f.gate.do(func() (err error) { n, err = f.r.Read(b); return err })
	return n, err
}

func (f *reader) ReadAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pos, err := f.r.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	var n int
	err = f.gate.do(func() (err error) { n, err = f.r.ReadAt(b, off); return err })
	if _, serr := f.r.Seek(pos, io.SeekStart); serr != nil && err == nil {
		err = serr
	}
	return n, err
}

func (f *reader) Close() error                       { return f.r.Close() }
func (f *reader) Size() (int64, error)               { return f.r.Stat().Size(), nil }
func (f *reader) Sync() error                        { return nil }
func (f *reader) Write([]byte) (int, error)          { return 0, unsupported("write", f.name) }
func (f *reader) WriteAt([]byte, int64) (int, error) { return 0, unsupported("write", f.name) }
func (f *reader) Truncate(int64) error               { return unsupported("truncate", f.name) }
