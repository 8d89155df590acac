package filesystem

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// HDFS is an FS over a directory of a Hadoop file system.
type HDFS struct {
	client *hdfs.Client
	addr   string
	root   string // absolute HDFS path

	// CloseTimeout bounds how long Close retries while the NameNode reports
	// that the last block is still replicating.
	CloseTimeout time.Duration

	clock func() time.Time
	sleep func(time.Duration)

	mu          sync.Mutex // guards the two fields below
	replication int
	blockSize   int64
}

// HDFSOptions tune NewHDFS. The zero value reads everything from the
// environment.
type HDFSOptions struct {
	// User overrides HADOOP_USER_NAME and the current OS user.
	User string
	// Clock and Sleep time the retries of Close while the last block is
	// replicating (default time.Now and time.Sleep).
	Clock func() time.Time
	Sleep func(time.Duration)
	// CloseTimeout bounds the retries of Close (default 60s).
	CloseTimeout time.Duration
}

// NewHDFS connects to the NameNode at addr ("host:port"; empty means the
// NameNodes of the Hadoop configuration found through HADOOP_CONF_DIR or
// HADOOP_HOME) and returns an FS rooted at root, which is created if needed.
// The user is opts.User, else HADOOP_USER_NAME, else the OS user.
func NewHDFS(addr, root string, opts HDFSOptions) (*HDFS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("filesystem: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	o := hdfs.ClientOptionsFromConf(conf)
	if addr != "" {
		o.Addresses = strings.Split(addr, ",")
	}
	if len(o.Addresses) == 0 {
		return nil, fmt.Errorf("%w: no NameNode address in the URI and none in HADOOP_CONF_DIR", ErrBadURI)
	}
	o.User = opts.User
	if o.User == "" {
		o.User = os.Getenv("HADOOP_USER_NAME")
	}
	if o.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("filesystem: no HDFS user: set HADOOP_USER_NAME: %w", err)
		}
		o.User = u.Username
	}
	c, err := hdfs.NewClient(o)
	if err != nil {
		return nil, fmt.Errorf("filesystem: connecting to HDFS %s: %w", strings.Join(o.Addresses, ","), err)
	}
	if root == "" {
		root = "/"
	}
	root = path.Clean("/" + root)
	if err := c.MkdirAll(root, 0o755); err != nil {
		c.Close()
		return nil, fmt.Errorf("filesystem: creating HDFS root %s: %w", root, err)
	}
	h := &HDFS{client: c, addr: strings.Join(o.Addresses, ","), root: root, CloseTimeout: 60 * time.Second,
		clock: opts.Clock, sleep: opts.Sleep}
	if h.clock == nil {
		h.clock = time.Now
	}
	if h.sleep == nil {
		h.sleep = time.Sleep
	}
	if opts.CloseTimeout > 0 {
		h.CloseTimeout = opts.CloseTimeout
	}
	return h, nil
}

// Client returns the underlying HDFS client (for tests and tools).
func (h *HDFS) Client() *hdfs.Client { return h.client }

// Abs returns the absolute HDFS path of a relative name.
func (h *HDFS) Abs(name string) (string, error) { return h.path(name) }

func (h *HDFS) path(name string) (string, error) {
	c, err := Clean(name)
	if err != nil {
		return "", err
	}
	return path.Join(h.root, c), nil
}

// String implements FS.
func (h *HDFS) String() string { return "hdfs://" + h.addr + h.root }

// Close implements FS.
func (h *HDFS) Close() error { return h.client.Close() }

func (h *HDFS) defaults() (int, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.replication == 0 {
		d, err := h.client.ServerDefaults()
		if err != nil {
			return 0, 0, fmt.Errorf("filesystem: HDFS server defaults: %w", err)
		}
		h.replication, h.blockSize = d.Replication, d.BlockSize
	}
	return h.replication, h.blockSize, nil
}

// Create implements FS: an HDFS create with overwrite=false.
func (h *HDFS) Create(name string) (File, error) {
	p, err := h.path(name)
	if err != nil {
		return nil, err
	}
	rep, bs, err := h.defaults()
	if err != nil {
		return nil, err
	}
	w, err := h.client.CreateFile(p, rep, bs, 0o644)
	if err != nil {
		return nil, h.createErr(name, p, err)
	}
	return &hdfsFile{w: w, timeout: h.CloseTimeout, clock: h.clock, sleep: h.sleep}, nil
}

// createErr classifies a failed create: any failure on an existing path is
// ErrExist (FileAlreadyExists and AlreadyBeingCreated alike).
func (h *HDFS) createErr(name, p string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return &fs.PathError{Op: "create", Path: name, Err: ErrExist}
	}
	if _, serr := h.client.Stat(p); serr == nil {
		return &fs.PathError{Op: "create", Path: name, Err: fmt.Errorf("%w (%v)", ErrExist, err)}
	}
	return err
}

type hdfsFile struct {
	w       *hdfs.FileWriter
	timeout time.Duration
	clock   func() time.Time
	sleep   func(time.Duration)
}

// Write skips empty writes: the client allocates a block (addBlock) on its
// first Write even for zero bytes, no DataNode ever receives that block, and
// the NameNode then never completes the file (Close reports "replication in
// progress" until the close timeout). With no Write, Close completes an
// empty file with no block at once.
func (f *hdfsFile) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return f.w.Write(b)
}

// Close completes the file, retrying with backoff while the NameNode says
// the last block is still replicating (as the Java client does).
func (f *hdfsFile) Close() error {
	deadline := f.clock().Add(f.timeout)
	wait := 10 * time.Millisecond
	for {
		err := f.w.Close()
		if err == nil || !hdfs.IsErrReplicating(err) {
			return err
		}
		if f.clock().After(deadline) {
			return fmt.Errorf("filesystem: HDFS close still replicating after %s: %w", f.timeout, err)
		}
		f.sleep(wait) // a backoff against the NameNode, not a wait for a test event
		if wait < time.Second {
			wait *= 2
		}
	}
}

// WriteExclusive implements FS: create with overwrite=false, one write, close.
func (h *HDFS) WriteExclusive(name string, data []byte) error {
	f, err := h.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Open implements FS.
func (h *HDFS) Open(name string) (io.ReadCloser, error) {
	p, err := h.path(name)
	if err != nil {
		return nil, err
	}
	return h.client.Open(p)
}

// Rename implements FS. HDFS's rename overwrites, so this checks the
// destination first: exclusive only when nobody else creates newname (the
// commit protocol guarantees that for its final paths).
func (h *HDFS) Rename(oldname, newname string) error {
	op, err := h.path(oldname)
	if err != nil {
		return err
	}
	np, err := h.path(newname)
	if err != nil {
		return err
	}
	if _, err := h.client.Stat(np); err == nil {
		return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, err := h.client.Stat(op); err != nil {
		return err
	}
	return h.client.Rename(op, np)
}

// Remove implements FS.
func (h *HDFS) Remove(name string) error {
	p, err := h.path(name)
	if err != nil {
		return err
	}
	if err := h.client.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveAll implements FS.
func (h *HDFS) RemoveAll(name string) error {
	p, err := h.path(name)
	if err != nil {
		return err
	}
	if p == h.root {
		return &fs.PathError{Op: "removeall", Path: name, Err: ErrBadPath}
	}
	if err := h.client.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// MkdirAll implements FS.
func (h *HDFS) MkdirAll(name string) error {
	p, err := h.path(name)
	if err != nil {
		return err
	}
	return h.client.MkdirAll(p, 0o755)
}

// List implements FS.
func (h *HDFS) List(dir string) ([]FileInfo, error) {
	p, err := h.path(dir)
	if err != nil {
		return nil, err
	}
	ents, err := h.client.ReadDir(p)
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		out = append(out, fromOS(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (h *HDFS) Stat(name string) (FileInfo, error) {
	p, err := h.path(name)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := h.client.Stat(p)
	if err != nil {
		return FileInfo{}, err
	}
	return fromOS(st), nil
}
