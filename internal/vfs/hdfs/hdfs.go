// Package hdfs is the vfs.FS of a Hadoop file system, over
// github.com/colinmarc/hdfs/v2. Names are absolute HDFS paths; the writers
// reach it through writers/filesystem.Open("hdfs://host:port/dir"), which
// confines it to dir.
//
// What HDFS promises, against vfs.FS's contract:
//
//   - CreateExclusive is a create with overwrite=false: atomic and exclusive
//     on the NameNode. Create (replacing) is a remove then a create, not
//     atomic.
//   - Files are append-only: Write and Sync work on a file being written,
//     WriteAt only at its end; Read, ReadAt and Size on a file opened for
//     reading. Everything else (random writes, Truncate, OpenReadWrite, reads
//     of a file being written) fails with vfs.ErrUnsupported.
//   - File.Sync is the client's Flush: it sends what is buffered down the
//     DataNode pipeline and does not wait for the acknowledgements (the
//     client has no hflush), so Sync alone makes nothing durable. Close
//     does: it sends the rest, waits until every DataNode of the pipeline
//     acknowledged the block, and completes the file on the NameNode,
//     retrying while the NameNode says the last block is still replicating
//     (bounded by Options.CloseTimeout). An empty file has no block and
//     closes at once.
//   - WriteExclusive is CreateExclusive, one Write and Close: a reader may
//     see the file empty or partial while its writer writes.
//   - RenameReplace is the client's Rename, which overwrites: atomic on the
//     NameNode. RenameNoReplace checks that newname is missing first, then
//     renames: exclusive only when no one else creates newname meanwhile
//     (the writers' commit protocol guarantees that for its final paths;
//     everything raced for is created with CreateExclusive).
//   - SyncDir does nothing: every namespace change is in the NameNode's edit
//     log when it returns.
//   - A file removed while open for reading may stop being readable.
package hdfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/user"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krb "github.com/jcmturner/gokrb5/v8/client"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrNoNameNode reports that neither the address given nor the Hadoop
// configuration names a NameNode.
var ErrNoNameNode = errors.New("hdfs: no NameNode")

// FS is a vfs.FS over one HDFS cluster.
type FS struct {
	client *hdfs.Client
	addr   string
	opts   Options
	krb    *krb.Client // nil on a cluster without Kerberos

	mu          sync.Mutex // guards the two fields below
	replication int
	blockSize   int64
}

var _ vfs.FS = (*FS)(nil)

// Options tune New. The zero value reads everything from the environment.
type Options struct {
	// User overrides HADOOP_USER_NAME and the current OS user.
	User string
	// Clock times the retries of Close while the last block is
	// replicating (default the wall clock).
	Clock clock.Clock
	// CloseTimeout bounds the retries of Close (default 60s).
	CloseTimeout time.Duration
	// Kerberos logs in to a Kerberized cluster. It is used when set, or
	// when the Hadoop configuration says
	// hadoop.security.authentication=kerberos (then from the environment:
	// see Kerberos).
	Kerberos Kerberos
	// DialNamenode dials the NameNode (default a net.Dialer); the fault
	// tests wrap it to drop live connections.
	DialNamenode func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New connects to the NameNode at addr ("host:port[,host:port]"; empty means
// the NameNodes of the Hadoop configuration found through HADOOP_CONF_DIR or
// HADOOP_HOME). The user is opts.User, else HADOOP_USER_NAME, else the OS
// user; on a Kerberized cluster it is the Kerberos principal (see
// Options.Kerberos), the NameNode's principal is the configuration's
// dfs.namenode.kerberos.principal (its _HOST replaced by the NameNode's
// host name), and dfs.data.transfer.protection sets SASL on the DataNode
// connections.
func New(addr string, opts Options) (*FS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("hdfs: reading the Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	o := hdfs.ClientOptionsFromConf(conf)
	if addr != "" {
		o.Addresses = strings.Split(addr, ",")
	}
	if len(o.Addresses) == 0 {
		return nil, fmt.Errorf("%w: no NameNode address given and none in HADOOP_CONF_DIR", ErrNoNameNode)
	}
	o.User = opts.User
	if o.User == "" {
		o.User = os.Getenv("HADOOP_USER_NAME")
	}
	if o.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("hdfs: no HDFS user: set HADOOP_USER_NAME: %w", err)
		}
		o.User = u.Username
	}
	o.NamenodeDialFunc = opts.DialNamenode
	if o.KerberosClient != nil || opts.Kerberos.Enabled() {
		if o.KerberosServicePrincipleName == "" {
			return nil, fmt.Errorf("%w: no NameNode principal: set dfs.namenode.kerberos.principal (e.g. hdfs/_HOST@REALM) in HADOOP_CONF_DIR's hdfs-site.xml", ErrKerberos)
		}
		if o.KerberosClient, err = login(opts.Kerberos); err != nil {
			return nil, err
		}
	}
	c, err := hdfs.NewClient(o)
	if err != nil {
		if o.KerberosClient != nil {
			o.KerberosClient.Destroy()
		}
		return nil, fmt.Errorf("hdfs: connecting to %s: %w", strings.Join(o.Addresses, ","), explain(err, o))
	}
	opts.Clock = clock.OrReal(opts.Clock)
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 60 * time.Second
	}
	h := &FS{client: c, addr: strings.Join(o.Addresses, ","), opts: opts, krb: o.KerberosClient}
	// The first call shows whether the NameNode took the connection: a
	// secure NameNode answers a simple-auth client with a connection error
	// the client sees only at its first call.
	if _, _, err := h.defaults(); err != nil {
		h.Close()
		return nil, fmt.Errorf("hdfs: connecting to %s: %w", h.addr, explain(err, o))
	}
	return h, nil
}

// explain adds what a refused connection most likely means.
func explain(err error, o hdfs.ClientOptions) error {
	msg := err.Error()
	switch {
	case o.KerberosClient == nil && (strings.Contains(msg, "SIMPLE authentication is not enabled") || strings.Contains(msg, "unexpected sequence number")):
		// The client reads a connection-level error (callId -1, "SIMPLE
		// authentication is not enabled") as an unexpected sequence number.
		return fmt.Errorf("%w: the NameNode refused this simple-auth (no Kerberos) connection: the cluster requires Kerberos: set hadoop.security.authentication=kerberos in HADOOP_CONF_DIR's core-site.xml, or output.kerberos", err)
	case o.KerberosClient != nil && strings.Contains(msg, "kerberos authentication not supported"):
		return fmt.Errorf("%w (the NameNode does not take Kerberos: is hadoop.security.authentication=kerberos on the cluster?)", err)
	}
	return err
}

// Client returns the underlying HDFS client (for tests and tools).
func (h *FS) Client() *hdfs.Client { return h.client }

// CloseTimeout returns how long a file's Close retries while its last block
// is replicating.
func (h *FS) CloseTimeout() time.Duration { return h.opts.CloseTimeout }

// String implements vfs.FS.
func (h *FS) String() string { return "hdfs://" + h.addr }

// Close implements vfs.FS (it also ends the Kerberos login's renewals).
func (h *FS) Close() error {
	err := h.client.Close()
	if h.krb != nil {
		h.krb.Destroy()
	}
	return err
}

// KerberosPrincipal returns the principal the client logged in as (""
// without Kerberos).
func (h *FS) KerberosPrincipal() string {
	if h.krb == nil {
		return ""
	}
	return h.krb.Credentials.UserName() + "@" + h.krb.Credentials.Realm()
}

func (h *FS) defaults() (int, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.replication == 0 {
		var d hdfs.ServerDefaults
		err := h.again(func() (err error) { d, err = h.client.ServerDefaults(); return err })
		if err != nil {
			return 0, 0, fmt.Errorf("hdfs: server defaults: %w", err)
		}
		h.replication, h.blockSize = d.Replication, d.BlockSize
	}
	return h.replication, h.blockSize, nil
}

// Create implements vfs.FS: remove, then create (not atomic).
func (h *FS) Create(name string) (vfs.File, error) {
	if err := h.client.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return h.CreateExclusive(name)
}

// CreateExclusive implements vfs.FS: an HDFS create with overwrite=false.
func (h *FS) CreateExclusive(name string) (vfs.File, error) {
	rep, bs, err := h.defaults()
	if err != nil {
		return nil, err
	}
	w, err := h.client.CreateFile(name, rep, bs, 0o644)
	if err != nil {
		return nil, h.createErr(name, err)
	}
	return &writer{w: w, name: name, opts: &h.opts}, nil
}

// createErr classifies a failed create: any failure on an existing path is
// ErrExist (FileAlreadyExists and AlreadyBeingCreated alike).
func (h *FS) createErr(name string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return &fs.PathError{Op: "create", Path: name, Err: vfs.ErrExist}
	}
	if _, serr := h.stat(name); serr == nil {
		return &fs.PathError{Op: "create", Path: name, Err: fmt.Errorf("%w (%v)", vfs.ErrExist, err)}
	}
	return err
}

// WriteExclusive implements vfs.FS: create with overwrite=false, one write,
// close.
func (h *FS) WriteExclusive(name string, data []byte) error {
	f, err := h.CreateExclusive(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Open implements vfs.FS.
func (h *FS) Open(name string) (vfs.File, error) {
	var r *hdfs.FileReader
	err := h.again(func() (err error) { r, err = h.client.Open(name); return err })
	if err != nil {
		return nil, err
	}
	return &reader{r: r, name: name}, nil
}

// OpenReadWrite implements vfs.FS: unsupported (HDFS files are append-only).
func (h *FS) OpenReadWrite(name string) (vfs.File, error) {
	return nil, unsupported("open read-write", name)
}

func unsupported(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: vfs.ErrUnsupported}
}

// RenameReplace implements vfs.FS: HDFS's rename, which overwrites.
func (h *FS) RenameReplace(oldname, newname string) error {
	return h.client.Rename(oldname, newname)
}

// RenameNoReplace implements vfs.FS: check that newname is missing, then
// rename (exclusive only when no one else creates newname).
func (h *FS) RenameNoReplace(oldname, newname string) error {
	if _, err := h.stat(newname); err == nil {
		return &fs.PathError{Op: "rename", Path: newname, Err: vfs.ErrExist}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, err := h.stat(oldname); err != nil {
		return err
	}
	return h.client.Rename(oldname, newname)
}

// Remove implements vfs.FS.
func (h *FS) Remove(name string) error { return h.client.Remove(name) }

// RemoveAll implements vfs.FS.
func (h *FS) RemoveAll(name string) error {
	if err := h.again(func() error { return h.client.RemoveAll(name) }); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// MkdirAll implements vfs.FS.
func (h *FS) MkdirAll(dir string) error {
	return h.again(func() error { return h.client.MkdirAll(dir, 0o755) })
}

// List implements vfs.FS.
func (h *FS) List(dir string) ([]vfs.FileInfo, error) {
	var ents []fs.FileInfo
	err := h.again(func() (err error) { ents, err = h.client.ReadDir(dir); return err })
	if err != nil {
		return nil, err
	}
	out := make([]vfs.FileInfo, 0, len(ents))
	for _, e := range ents {
		out = append(out, vfs.FromFileInfo(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements vfs.FS.
func (h *FS) Stat(name string) (vfs.FileInfo, error) {
	st, err := h.stat(name)
	if err != nil {
		return vfs.FileInfo{}, err
	}
	return vfs.FromFileInfo(st), nil
}

// SyncDir implements vfs.FS: nothing to do (the NameNode's edit log).
func (h *FS) SyncDir(string) error { return nil }

func (h *FS) stat(name string) (st fs.FileInfo, err error) {
	err = h.again(func() (err error) { st, err = h.client.Stat(name); return err })
	return st, err
}

// again runs an idempotent NameNode call, and again when it failed
// because its NameNode connection was lost (closed by the NameNode or the
// network, a NameNode restart): the client notices a dead connection only
// when a call fails on it, and then keeps the NameNode out for its 5 s
// backoff, so the next tries wait that out and dial again; on a Kerberized
// cluster the new connection authenticates with a new service ticket from
// the (renewed) login. At most three tries. Calls that change the
// namespace in ways a retry could misreport (create, rename, remove) are
// not retried; the next call reconnects.
func (h *FS) again(call func() error) error {
	err := call()
	for try := 1; try < 3 && err != nil && connectionLost(err); try++ {
		if strings.Contains(err.Error(), "no available namenodes") {
			time.Sleep(namenodeBackoff)
		}
		err = call()
	}
	return err
}

// namenodeBackoff is how long the client keeps a failed NameNode out
// (colinmarc/hdfs's backoffDuration), with a margin.
const namenodeBackoff = 5*time.Second + 200*time.Millisecond

// connectionLost reports an error of a connection the peer closed.
func connectionLost(err error) bool {
	if strings.Contains(err.Error(), "no available namenodes") && !strings.Contains(err.Error(), "kerberos") && !strings.Contains(err.Error(), "KRB") {
		return true // the backoff after a lost connection
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
