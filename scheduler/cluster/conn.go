package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrConfig reports a bad --zookeeper value.
var ErrConfig = errors.New("cluster: config")

// Conn is a ZooKeeper session with the paths rooted at a chroot. It
// reports the end of the session it started with (Expired): the ephemeral
// nodes made under that session are gone then.
type Conn struct {
	zk      *zk.Conn
	root    string
	log     *slog.Logger
	first   int64 // the first session's id
	expired chan struct{}
	once    sync.Once
}

// ParseConnect splits "host:port,host:port/chroot" into servers and chroot
// (default chroot "/sluice").
func ParseConnect(s string) ([]string, string, error) {
	hosts, chroot := s, "/sluice"
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], path.Clean(s[i:])
	}
	if hosts == "" || chroot == "/" {
		return nil, "", fmt.Errorf("%w: --zookeeper %q: want host:port[,host:port]/chroot, e.g. 127.0.0.1:2181/sluice", ErrConfig, s)
	}
	return strings.Split(hosts, ","), chroot, nil
}

type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// Dial connects to ZooKeeper and waits (up to timeout) for a session.
func Dial(connect string, sessionTimeout time.Duration, log *slog.Logger) (*Conn, error) {
	servers, root, err := ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	c := &Conn{root: root, log: log, expired: make(chan struct{})}
	conn, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("cluster: ZooKeeper %s: %w", connect, err)
	}
	c.zk = conn
	deadline := time.After(max(2*sessionTimeout, 10*time.Second))
	for c.first == 0 {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				c.first = conn.SessionID()
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("cluster: no ZooKeeper session with %s: is ZooKeeper running there?", connect)
		}
	}
	go c.watch(events)
	for _, p := range []string{"", "/workers", "/runs", "/queue", "/claims", "/results"} {
		if err := c.ensure(p); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Conn) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		if ev.State == zk.StateExpired || (ev.State == zk.StateHasSession && c.zk.SessionID() != c.first) {
			c.log.Warn("ZooKeeper session expired: its ephemeral nodes are gone", "session", fmt.Sprintf("%x", c.first))
			c.once.Do(func() { close(c.expired) })
		}
	}
	c.once.Do(func() { close(c.expired) }) // closed connection
}

// Expired is closed when the first session ended (or the Conn closed).
func (c *Conn) Expired() <-chan struct{} { return c.expired }

// Close ends the session.
func (c *Conn) Close() { c.zk.Close() }

// SessionID is the current session's id.
func (c *Conn) SessionID() int64 { return c.zk.SessionID() }

// p returns the absolute path of rel under the chroot.
func (c *Conn) p(rel string) string { return c.root + rel }

// ensure creates the persistent node rel and its parents.
func (c *Conn) ensure(rel string) error {
	full := c.p(rel)
	parts := strings.Split(strings.TrimPrefix(full, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		_, err := c.zk.Create(cur, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("cluster: creating %s: %w", cur, err)
		}
	}
	return nil
}

// deleteOwned deletes an ephemeral node only if this session owns it.
func (c *Conn) deleteOwned(rel string) {
	_, st, err := c.zk.Get(c.p(rel))
	if err != nil || st.EphemeralOwner != c.zk.SessionID() {
		return
	}
	c.zk.Delete(c.p(rel), st.Version)
}
