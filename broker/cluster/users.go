package cluster

// The users' SCRAM credentials in ZooKeeper, where Kafka 2.x kept them:
// /config/users/<user> = {"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=N"}}.
// A user name is stored URL path-escaped (a '/' cannot be in a node name).

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/broker/metadata"
)

const userConfigsPath = "/config/users"

var _ metadata.UserStore = (*Store)(nil)

func userPath(name string) string { return userConfigsPath + "/" + url.PathEscape(name) }

// Users implements metadata.UserStore.
func (st *Store) Users() (map[string]map[string]string, error) {
	s, err := st.n.session()
	if err != nil {
		return nil, storeErr("%v", err)
	}
	names, _, err := s.ZK().Children(s.Path(userConfigsPath))
	if isNoNode(err) {
		return map[string]map[string]string{}, nil
	}
	if err != nil {
		return nil, storeErr("%s: %v", userConfigsPath, err)
	}
	out := make(map[string]map[string]string, len(names))
	for _, escaped := range names {
		name, err := url.PathUnescape(escaped)
		if err != nil {
			continue // not written by sluice or Kafka
		}
		creds, err := st.User(name)
		if err != nil {
			return nil, err
		}
		if len(creds) > 0 {
			out[name] = creds
		}
	}
	return out, nil
}

// User implements metadata.UserStore.
func (st *Store) User(name string) (map[string]string, error) {
	s, err := st.n.session()
	if err != nil {
		return nil, storeErr("%v", err)
	}
	data, _, err := s.ZK().Get(s.Path(userPath(name)))
	if isNoNode(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr("read %s: %v", userPath(name), err)
	}
	var z configZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", metadata.ErrCorrupt, userPath(name), err)
	}
	if len(z.Config) == 0 {
		return nil, nil
	}
	return z.Config, nil
}

// SetUser implements metadata.UserStore: a blind replace (UpdateUser to
// change what is there).
func (st *Store) SetUser(name string, creds map[string]string) error {
	known := true
	err := st.UpdateUser(name, func(old map[string]string) (map[string]string, error) {
		known = old != nil
		return creds, nil
	})
	if err == nil && !known && len(creds) == 0 {
		return fmt.Errorf("%w: %q", metadata.ErrUnknownUser, name)
	}
	return err
}

// UpdateUser implements metadata.UserStore: the node read with its version,
// changed, and created, set or deleted at that version; read again and
// changed again when another broker wrote in between.
func (st *Store) UpdateUser(name string, change func(map[string]string) (map[string]string, error)) error {
	if name == "" || len(name) > metadata.MaxUserName {
		return storeErr("user name of %d bytes", len(name))
	}
	s, err := st.n.session()
	if err != nil {
		return storeErr("%v", err)
	}
	if err := s.Ensure(userConfigsPath); err != nil {
		return storeErr("%s: %v", userConfigsPath, err)
	}
	p := s.Path(userPath(name))
	for try := 0; try < maxCASRetries; try++ {
		data, stat, err := s.ZK().Get(p)
		exists := !isNoNode(err)
		if err != nil && exists {
			return storeErr("read %s: %v", userPath(name), err)
		}
		var z configZNode
		if exists {
			if err := json.Unmarshal(data, &z); err != nil {
				return fmt.Errorf("%w: %s: %v", metadata.ErrCorrupt, userPath(name), err)
			}
		}
		var old map[string]string
		if len(z.Config) > 0 {
			old = z.Config
		}
		next, err := change(old)
		if err != nil {
			return err
		}
		switch {
		case !exists && len(next) == 0:
			return nil
		case !exists:
			_, err = s.ZK().Create(p, encodeConfig(next), 0, acl)
		case len(next) == 0:
			err = s.ZK().Delete(p, stat.Version)
		default:
			_, err = s.ZK().Set(p, encodeConfig(next), stat.Version)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		default:
			return storeErr("write %s: %v", userPath(name), err)
		}
	}
	return storeErr("write %s: lost %d races in a row", userPath(name), maxCASRetries)
}
