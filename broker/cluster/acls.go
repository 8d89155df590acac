package cluster

// The authorizer's ACLs in ZooKeeper: one node, /sluice/acls, holding
// metadata.ACLsFileV1's JSON ({"version":1,"acls":[...]}), changed by
// compare-and-set on its version and watched by every broker (WatchACLs),
// so an ACL created through one broker is enforced by all of them.
// (Kafka's ZooKeeper layout, a node per resource under /kafka-acl and
// sequential change notifications, is not followed: one node is read and
// watched in one step.)

import (
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/broker/metadata"
)

const (
	sluicePath = "/sluice"
	aclsPath   = sluicePath + "/acls"
)

var (
	_ metadata.ACLStore   = (*Store)(nil)
	_ metadata.ACLWatcher = (*Store)(nil)
)

// ACLs implements metadata.ACLStore.
func (st *Store) ACLs() ([]metadata.ACL, error) {
	s, err := st.n.session()
	if err != nil {
		return nil, storeErr("%v", err)
	}
	data, _, err := s.ZK().Get(s.Path(aclsPath))
	if isNoNode(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr("read %s: %v", aclsPath, err)
	}
	return metadata.DecodeACLs(aclsPath, data)
}

// UpdateACLs implements metadata.ACLStore: the node read with its version,
// changed and written at that version; read and changed again when another
// broker wrote in between.
func (st *Store) UpdateACLs(change func([]metadata.ACL) ([]metadata.ACL, error)) error {
	s, err := st.n.session()
	if err != nil {
		return storeErr("%v", err)
	}
	if err := s.Ensure(sluicePath); err != nil {
		return storeErr("%s: %v", sluicePath, err)
	}
	p := s.Path(aclsPath)
	for try := 0; try < maxCASRetries; try++ {
		data, stat, err := s.ZK().Get(p)
		exists := !isNoNode(err)
		if err != nil && exists {
			return storeErr("read %s: %v", aclsPath, err)
		}
		var old []metadata.ACL
		if exists {
			if old, err = metadata.DecodeACLs(aclsPath, data); err != nil {
				return err
			}
		}
		next, err := change(old)
		if err != nil {
			return err
		}
		enc, err := metadata.EncodeACLs(next)
		if err != nil {
			return err
		}
		if exists {
			_, err = s.ZK().Set(p, enc, stat.Version)
		} else {
			_, err = s.ZK().Create(p, enc, 0, acl)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		default:
			return storeErr("write %s: %v", aclsPath, err)
		}
	}
	return storeErr("write %s: lost %d races in a row", aclsPath, maxCASRetries)
}

// WatchACLs implements metadata.ACLWatcher: a watch on /sluice/acls armed
// before each call of changed (so no change between the read and the next
// watch is missed); a lost session or a failed watch calls changed again
// once a new watch is armed; so does an error from changed, a second later.
func (st *Store) WatchACLs(done <-chan struct{}, changed func() error) {
	for {
		s, err := st.n.session()
		var ch <-chan zk.Event
		if err == nil {
			_, _, ch, err = s.ZK().ExistsW(s.Path(aclsPath))
		}
		if err != nil {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if err := changed(); err != nil {
			select { // read again soon: the watch alone would wait for the next change
			case <-done:
				return
			case <-time.After(time.Second):
			}
			continue
		}
		select {
		case <-done:
			return
		case ev := <-ch:
			if ev.Err != nil || ev.Type == zk.EventNotWatching {
				select { // the session ended: wait for the next one
				case <-done:
					return
				case <-time.After(time.Second):
				}
			}
		}
	}
}
