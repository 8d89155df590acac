package metadata

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"sort"
	"sync"

	"github.com/sluicehq/sluice/internal/topicname"
	"github.com/sluicehq/sluice/internal/vfs"
)

const (
	topicsFile      = "topics.json"
	producerIDsFile = "producer-ids.json"
)

// FileStore is the single-node Store: topics.json and producer-ids.json in
// a directory of a vfs.FS (vfs.OS{} in production).
type FileStore struct {
	fs  vfs.FS
	dir string

	mu     sync.Mutex // serialises writes; guards the fields below
	topics map[string]Topic
	fresh  bool                         // topics.json did not exist at open
	nextID int64                        // first producer id of the next block to reserve
	users  map[string]map[string]string // users.json (users.go)
	acls   []ACL                        // acls.json (acls.go)
}

type topicsFileV1 struct {
	Version int          `json:"version"`
	Topics  []topicEntry `json:"topics"`
}

type topicEntry struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

type producerIDsFileV1 struct {
	Version   int   `json:"version"`
	NextBlock int64 `json:"next_block"`
}

// OpenFileStore reads the metadata files in dir, first removing the
// temporaries a crash may have left (topics.json.tmp, and .topics.json.tmp-N
// of older versions).
func OpenFileStore(fsys vfs.FS, dir string) (*FileStore, error) {
	s := &FileStore{fs: fsys, dir: dir, topics: map[string]Topic{}}
	if _, err := vfs.RemoveTemporaries(fsys, dir, topicsFile, producerIDsFile, usersFile, aclsFile); err != nil {
		return nil, storageErr("%s: %v", dir, err)
	}
	data, err := vfs.ReadFile(fsys, path.Join(dir, topicsFile))
	switch {
	case vfs.IsNotExist(err):
		s.fresh = true
	case err != nil:
		return nil, storageErr("read %s: %v", topicsFile, err)
	default:
		var f topicsFileV1
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%w: %s: %v (restore it from a backup, or remove it to adopt the partition directories found)", ErrCorrupt, path.Join(dir, topicsFile), err)
		}
		if f.Version != 1 {
			return nil, fmt.Errorf("%w: %s: version %d not understood (written by a newer sluice?)", ErrCorrupt, path.Join(dir, topicsFile), f.Version)
		}
		for _, e := range f.Topics {
			id, err := hex.DecodeString(e.ID)
			if err != nil || len(id) != 16 || e.Partitions < 1 || e.Partitions > MaxPartitions || topicname.Check(e.Name) != nil {
				return nil, fmt.Errorf("%w: %s: topic %q has a bad name, id or partition count", ErrCorrupt, path.Join(dir, topicsFile), e.Name)
			}
			t := Topic{Name: e.Name, Partitions: e.Partitions, Configs: e.Configs}
			copy(t.ID[:], id)
			s.topics[t.Name] = t
		}
	}
	data, err = vfs.ReadFile(fsys, path.Join(dir, producerIDsFile))
	switch {
	case vfs.IsNotExist(err):
	case err != nil:
		return nil, storageErr("read %s: %v", producerIDsFile, err)
	default:
		var f producerIDsFileV1
		if err := json.Unmarshal(data, &f); err != nil || f.Version != 1 || f.NextBlock < 0 {
			return nil, fmt.Errorf("%w: %s: cannot parse %q", ErrCorrupt, path.Join(dir, producerIDsFile), data)
		}
		s.nextID = f.NextBlock
	}
	if err := s.loadUsers(); err != nil {
		return nil, err
	}
	if err := s.loadACLs(); err != nil {
		return nil, err
	}
	return s, nil
}

// readFile reads name in the store's directory; nil, nil if it does not exist.
func readFile(s *FileStore, name string) ([]byte, error) {
	data, err := vfs.ReadFile(s.fs, path.Join(s.dir, name))
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storageErr("read %s: %v", name, err)
	}
	return data, nil
}

// writeFile replaces name in the store's directory atomically and durably.
func writeFile(s *FileStore, name string, data []byte) error {
	if err := vfs.WriteFileAtomic(s.fs, s.dir, name, data); err != nil {
		return storageErr("%v", err)
	}
	return nil
}

// Load implements Store.
func (s *FileStore) Load() ([]Topic, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedLocked(), s.fresh, nil
}

func (s *FileStore) sortedLocked() []Topic {
	out := make([]Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CreateTopic implements Store.
func (s *FileStore) CreateTopic(t Topic) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[t.Name]; ok {
		return fmt.Errorf("%w: %q", ErrTopicExists, t.Name)
	}
	s.topics[t.Name] = t
	if err := s.writeTopicsLocked(); err != nil {
		delete(s.topics, t.Name)
		return err
	}
	return nil
}

// UpdateTopic implements Store.
func (s *FileStore) UpdateTopic(t Topic) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.topics[t.Name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, t.Name)
	}
	t.ID = old.ID
	s.topics[t.Name] = t
	if err := s.writeTopicsLocked(); err != nil {
		s.topics[t.Name] = old
		return err
	}
	return nil
}

// DeleteTopic implements Store.
func (s *FileStore) DeleteTopic(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	delete(s.topics, name)
	if err := s.writeTopicsLocked(); err != nil {
		s.topics[name] = t
		return err
	}
	return nil
}

func (s *FileStore) writeTopicsLocked() error {
	f := topicsFileV1{Version: 1, Topics: []topicEntry{}}
	for _, t := range s.sortedLocked() {
		f.Topics = append(f.Topics, topicEntry{Name: t.Name, ID: hex.EncodeToString(t.ID[:]), Partitions: t.Partitions, Configs: t.Configs})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return storageErr("encode %s: %v", topicsFile, err)
	}
	if err := vfs.WriteFileAtomic(s.fs, s.dir, topicsFile, data); err != nil {
		return storageErr("%v", err)
	}
	s.fresh = false
	return nil
}

// ReserveProducerIDs implements Store.
func (s *FileStore) ReserveProducerIDs(n int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 1 || s.nextID > math.MaxInt64-n {
		return 0, ErrExhausted
	}
	end := s.nextID + n
	data, _ := json.Marshal(producerIDsFileV1{Version: 1, NextBlock: end})
	if err := vfs.WriteFileAtomic(s.fs, s.dir, producerIDsFile, data); err != nil {
		return 0, storageErr("%v", err)
	}
	first := s.nextID
	s.nextID = end
	return first, nil
}
