package metadata

// ACLs: the authorizer's bindings (broker/acl).
//
// An ACL is stored with Kafka's enum names as strings (resource type TOPIC,
// pattern LITERAL, operation READ, permission ALLOW), so the stored form
// reads as kafka-acls prints it. FileStore keeps them in
// <data dir>/acls.json ({"version":1,"acls":[...]}, replaced atomically);
// broker/cluster's Store in the one node /sluice/acls of the same JSON,
// changed by compare-and-set and watched by every broker.

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
)

// ACL is one stored binding.
type ACL struct {
	ResourceType string `json:"resource_type"` // TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"` // LITERAL, PREFIXED
	Principal    string `json:"principal"`    // User:alice, User:*
	Host         string `json:"host"`         // an address, or *
	Operation    string `json:"operation"`    // READ, WRITE, ALL, ...
	Permission   string `json:"permission"`   // ALLOW, DENY
}

// MaxACLs bounds the stored bindings (the cluster store keeps them in one
// ZooKeeper node, which holds at most 1 MiB).
const MaxACLs = 4000

// ACLStore holds the ACLs. Both Stores implement it. Every method is safe
// for concurrent use; a change is durable when UpdateACLs returns.
type ACLStore interface {
	// ACLs returns every stored binding.
	ACLs() ([]ACL, error)
	// UpdateACLs changes the bindings atomically: change gets the current
	// ones (its own copy) and returns the next, or an error, which
	// UpdateACLs returns having written nothing. A store that saw another
	// broker's change in between retries, so change may run more than once.
	UpdateACLs(change func([]ACL) ([]ACL, error)) error
}

// ACLWatcher is an ACLStore that other processes change too (the cluster
// store): WatchACLs calls changed after each change by anyone until done
// is closed (and once when it starts), so a cache can re-read; an error
// from changed makes it call again a second later.
type ACLWatcher interface {
	WatchACLs(done <-chan struct{}, changed func() error)
}

const aclsFile = "acls.json"

// ACLsFileV1 is the stored JSON of the bindings (acls.json and the
// cluster's node).
type ACLsFileV1 struct {
	Version int   `json:"version"`
	ACLs    []ACL `json:"acls"`
}

// EncodeACLs is the stored form of acls; an error when there are more
// than MaxACLs.
func EncodeACLs(acls []ACL) ([]byte, error) {
	if len(acls) > MaxACLs {
		return nil, fmt.Errorf("%w: %d ACLs, more than the %d stored", ErrStorage, len(acls), MaxACLs)
	}
	if acls == nil {
		acls = []ACL{}
	}
	return json.MarshalIndent(ACLsFileV1{Version: 1, ACLs: acls}, "", "  ")
}

// DecodeACLs parses the stored form; where names the file or node.
func DecodeACLs(where string, data []byte) ([]ACL, error) {
	var f ACLsFileV1
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (restore it from a backup; removing it removes every ACL)", ErrCorrupt, where, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%w: %s: version %d not understood (written by a newer sluice?)", ErrCorrupt, where, f.Version)
	}
	return f.ACLs, nil
}

func (s *FileStore) loadACLs() error {
	data, err := readFile(s, aclsFile)
	if err != nil || data == nil {
		return err
	}
	s.acls, err = DecodeACLs(path.Join(s.dir, aclsFile), data)
	return err
}

// ACLs implements ACLStore.
func (s *FileStore) ACLs() ([]ACL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acls), nil
}

// UpdateACLs implements ACLStore.
func (s *FileStore) UpdateACLs(change func([]ACL) ([]ACL, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := change(slices.Clone(s.acls))
	if err != nil {
		return err
	}
	data, err := EncodeACLs(next)
	if err != nil {
		return err
	}
	if err := writeFile(s, aclsFile, data); err != nil {
		return err
	}
	s.acls = slices.Clone(next)
	return nil
}
