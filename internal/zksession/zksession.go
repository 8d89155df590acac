// Package zksession is a ZooKeeper session with its paths rooted at a
// chroot, shared by the scheduler's cluster (scheduler/cluster) and the
// broker's (broker/cluster): parsing --zookeeper host:port[,host:port]/chroot,
// waiting for the first session, reporting its end, and the few helpers
// both use (create a path and its parents, delete an ephemeral node only
// when this session owns it).
//
// A Session reports the end of the session it started with (Expired): the
// ephemeral nodes made under it are gone then, and everything decided
// under it (a leadership, a registration) must be given up. The client
// library opens a new session by itself after an expiry; callers that
// need one of their own close this Session and Dial again.
package zksession

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
var ErrConfig = errors.New("zookeeper: config")

// ErrUnreachable reports that no session could be had within the wait.
var ErrUnreachable = errors.New("zookeeper: unreachable")

// Session is a ZooKeeper session with the paths rooted at a chroot.
type Session struct {
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

// Dial connects to ZooKeeper, waits (up to twice the session timeout, at
// least 10 s) for a session and creates the chroot.
func Dial(connect string, sessionTimeout time.Duration, log *slog.Logger) (*Session, error) {
	servers, root, err := ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Session{root: root, log: log, expired: make(chan struct{})}
	conn, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(zkLogger{log}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %s: %w", connect, err)
	}
	s.zk = conn
	deadline := time.After(max(2*sessionTimeout, 10*time.Second))
	for s.first == 0 {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				s.first = conn.SessionID()
			}
		case <-deadline:
			conn.Close()
			return nil, fmt.Errorf("%w: no ZooKeeper session with %s: is ZooKeeper running there?", ErrUnreachable, connect)
		}
	}
	go s.watch(events)
	if err := s.Ensure(""); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.Type != zk.EventSession {
			continue
		}
		if ev.State == zk.StateExpired || (ev.State == zk.StateHasSession && s.zk.SessionID() != s.first) {
			s.once.Do(func() {
				s.log.Warn("ZooKeeper session expired: its ephemeral nodes are gone", "session", fmt.Sprintf("%x", s.first))
				close(s.expired)
			})
		}
	}
	s.once.Do(func() { close(s.expired) }) // closed connection
}

// ZK is the client connection (its paths are absolute: use Path).
func (s *Session) ZK() *zk.Conn { return s.zk }

// Expired is closed when the first session ended (or the Session closed).
func (s *Session) Expired() <-chan struct{} { return s.expired }

// Close ends the session: its ephemeral nodes are deleted at once.
func (s *Session) Close() { s.zk.Close() }

// SessionID is the current session's id.
func (s *Session) SessionID() int64 { return s.zk.SessionID() }

// FirstSessionID is the id of the session this Session started with.
func (s *Session) FirstSessionID() int64 { return s.first }

// Path returns the absolute path of rel ("" or "/a/b") under the chroot.
func (s *Session) Path(rel string) string { return s.root + rel }

// Ensure creates the persistent node rel and its parents.
func (s *Session) Ensure(rel string) error {
	full := s.Path(rel)
	parts := strings.Split(strings.TrimPrefix(full, "/"), "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		_, err := s.zk.Create(cur, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zookeeper: creating %s: %w", cur, err)
		}
	}
	return nil
}

// DeleteOwned deletes an ephemeral node only if this session owns it.
func (s *Session) DeleteOwned(rel string) {
	_, st, err := s.zk.Get(s.Path(rel))
	if err != nil || st.EphemeralOwner != s.zk.SessionID() {
		return
	}
	_ = s.zk.Delete(s.Path(rel), st.Version)
}
