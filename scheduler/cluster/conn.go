package cluster

import (
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/zksession"
)

// ErrConfig reports a bad --zookeeper value (zksession.ErrConfig).
var ErrConfig = zksession.ErrConfig

// Conn is a ZooKeeper session with the paths rooted at a chroot
// (internal/zksession, shared with broker/cluster), plus the scheduler's
// nodes created at Dial.
type Conn struct {
	*zksession.Session
	zk *zk.Conn
}

// ParseConnect splits "host:port,host:port/chroot" into servers and chroot
// (default chroot "/sluice").
func ParseConnect(s string) ([]string, string, error) { return zksession.ParseConnect(s) }

// Dial connects to ZooKeeper and waits (up to timeout) for a session.
func Dial(connect string, sessionTimeout time.Duration, log *slog.Logger) (*Conn, error) {
	s, err := zksession.Dial(connect, sessionTimeout, log)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{"/workers", "/runs", "/queue", "/claims", "/results"} {
		if err := s.Ensure(p); err != nil {
			s.Close()
			return nil, err
		}
	}
	return &Conn{Session: s, zk: s.ZK()}, nil
}

// p returns the absolute path of rel under the chroot.
func (c *Conn) p(rel string) string { return c.Path(rel) }

// deleteOwned deletes an ephemeral node only if this session owns it.
func (c *Conn) deleteOwned(rel string) { c.DeleteOwned(rel) }
