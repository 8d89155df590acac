package hdfs

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// writer is a file being written: append-only.
type writer struct {
	w       *hdfs.FileWriter
	name    string
	opts    *Options
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
	n, err := f.w.Write(b)
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
}

func (f *reader) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.Read(b)
}

func (f *reader) ReadAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pos, err := f.r.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	n, err := f.r.ReadAt(b, off)
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
