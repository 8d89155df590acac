// Package storetest is the conformance suite of metadata.Store: every
// implementation (FileStore, broker/cluster's ZooKeeper Store) runs it from
// its own tests, so they keep one behaviour.
package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/broker/metadata"
)

// Factory makes an empty backing for one case and returns how to open a
// Store on it; each call of open is a restart (a new Store over the same
// stored metadata). The factory cleans up at the end of the test.
type Factory func(t *testing.T) (open func() metadata.Store)

// Run runs every case against the Stores the factory makes.
func Run(t *testing.T, factory Factory) {
	t.Run("Topics", func(t *testing.T) { topics(t, factory(t)) })
	t.Run("ProducerIDs", func(t *testing.T) { producerIDs(t, factory(t)) })
	t.Run("ConcurrentProducerIDs", func(t *testing.T) { concurrentProducerIDs(t, factory(t)) })
	t.Run("Users", func(t *testing.T) { users(t, factory(t)) })
	t.Run("ConcurrentUserUpdates", func(t *testing.T) { concurrentUserUpdates(t, factory(t)) })
}

// concurrentUserUpdates: UpdateUser calls racing on one user each add
// their own credential and none is lost (a read, change and blind write
// would lose most); a change that fails writes nothing.
func concurrentUserUpdates(t *testing.T, open func() metadata.Store) {
	us := open().(metadata.UserStore)
	const workers, each = 4, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%d-%d", w, i)
				if err := us.UpdateUser("carol", func(creds map[string]string) (map[string]string, error) {
					if creds == nil {
						creds = map[string]string{}
					}
					creds[key] = "v"
					return creds, nil
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := open().(metadata.UserStore).User("carol")
	must(t, err)
	if len(got) != workers*each {
		t.Fatalf("%d concurrent updates of one user kept %d credentials: %v", workers*each, len(got), got)
	}
	refused := errors.New("refused")
	if err := us.UpdateUser("carol", func(map[string]string) (map[string]string, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatalf("a failing change: %v, want its error", err)
	}
	if got, err := us.User("carol"); err != nil || len(got) != workers*each {
		t.Fatalf("after a failing change: %d credentials, %v", len(got), err)
	}
}

// users: SetUser adds, replaces and removes a user's credentials, a
// restart loads them, and removing a user with none is ErrUnknownUser.
func users(t *testing.T, open func() metadata.Store) {
	us, ok := open().(metadata.UserStore)
	if !ok {
		t.Fatal("the Store does not implement metadata.UserStore")
	}
	if got, err := us.Users(); err != nil || len(got) != 0 {
		t.Fatalf("new store: users %v, %v", got, err)
	}
	alice := map[string]string{"SCRAM-SHA-512": "salt=YQ==,stored_key=x,server_key=y,iterations=4096"}
	must(t, us.SetUser("alice", alice))
	must(t, us.SetUser("bob", map[string]string{"SCRAM-SHA-256": "b1"}))
	must(t, us.SetUser("bob", map[string]string{"SCRAM-SHA-256": "b2", "SCRAM-SHA-512": "b3"}))
	us = open().(metadata.UserStore)
	all, err := us.Users()
	must(t, err)
	if len(all) != 2 || all["alice"]["SCRAM-SHA-512"] != alice["SCRAM-SHA-512"] || all["bob"]["SCRAM-SHA-256"] != "b2" || all["bob"]["SCRAM-SHA-512"] != "b3" {
		t.Fatalf("after restart: %v", all)
	}
	must(t, us.SetUser("alice", nil))
	if err := us.SetUser("alice", nil); !errors.Is(err, metadata.ErrUnknownUser) {
		t.Fatalf("removing a removed user: %v, want ErrUnknownUser", err)
	}
	if got, err := us.User("alice"); err != nil || got != nil {
		t.Fatalf("removed user: %v, %v", got, err)
	}
	if got, err := open().(metadata.UserStore).User("bob"); err != nil || got["SCRAM-SHA-512"] != "b3" {
		t.Fatalf("bob after restart: %v, %v", got, err)
	}
}

// topics: create, duplicate, update, delete and unknown names behave the
// same everywhere, and a restart loads what was written, sorted by name.
func topics(t *testing.T, open func() metadata.Store) {
	s := open()
	if got, fresh, err := s.Load(); err != nil || !fresh || len(got) != 0 {
		t.Fatalf("new store: %d topics, fresh %v, %v", len(got), fresh, err)
	}
	a := metadata.Topic{Name: "a", ID: metadata.NewTopicID(), Partitions: 3, Configs: map[string]string{"retention.ms": "1"}}
	must(t, s.CreateTopic(a))
	if err := s.CreateTopic(metadata.Topic{Name: "a", ID: metadata.NewTopicID(), Partitions: 1}); !errors.Is(err, metadata.ErrTopicExists) {
		t.Fatalf("duplicate create: %v, want ErrTopicExists", err)
	}
	must(t, s.CreateTopic(metadata.Topic{Name: "c", ID: metadata.NewTopicID(), Partitions: 1}))
	must(t, s.CreateTopic(metadata.Topic{Name: "b", ID: metadata.NewTopicID(), Partitions: 2}))
	must(t, s.DeleteTopic("b"))
	if err := s.DeleteTopic("b"); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("second delete: %v, want ErrUnknownTopic", err)
	}
	if err := s.UpdateTopic(metadata.Topic{Name: "nope", Partitions: 1}); !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("update of an unknown topic: %v, want ErrUnknownTopic", err)
	}
	// An update grows the partitions and replaces the configs; the id stays.
	must(t, s.UpdateTopic(metadata.Topic{Name: "a", ID: metadata.NewTopicID(), Partitions: 4, Configs: map[string]string{"cleanup.policy": "compact"}}))
	// A topic deleted can be created again.
	must(t, s.CreateTopic(metadata.Topic{Name: "b", ID: metadata.NewTopicID(), Partitions: 1}))
	must(t, s.DeleteTopic("b"))

	for _, st := range []metadata.Store{s, open()} { // as written, and after a restart
		got, fresh, err := st.Load()
		if err != nil || fresh {
			t.Fatalf("load: fresh %v, %v", fresh, err)
		}
		if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
			t.Fatalf("load: %+v, want topics a and c", got)
		}
		if got[0].ID != a.ID || got[0].Partitions != 4 || len(got[0].Configs) != 1 || got[0].Configs["cleanup.policy"] != "compact" {
			t.Fatalf("topic a after update: %+v (id %x, want %x)", got[0], got[0].ID, a.ID)
		}
		if got[1].Partitions != 1 || got[1].Configs != nil {
			t.Fatalf("topic c: %+v", got[1])
		}
	}
}

// producerIDs: blocks follow each other from 0 and never repeat across a
// restart; a block of fewer than one id is refused.
func producerIDs(t *testing.T, open func() metadata.Store) {
	s := open()
	first, err := s.ReserveProducerIDs(1000)
	if err != nil || first != 0 {
		t.Fatalf("first block at %d, %v; want 0", first, err)
	}
	if next, err := s.ReserveProducerIDs(10); err != nil || next != 1000 {
		t.Fatalf("second block at %d, %v; want 1000", next, err)
	}
	if next, err := open().ReserveProducerIDs(5); err != nil || next != 1010 {
		t.Fatalf("block after a restart at %d, %v; want 1010", next, err)
	}
	if _, err := s.ReserveProducerIDs(0); !errors.Is(err, metadata.ErrExhausted) {
		t.Fatalf("block of 0: %v, want ErrExhausted", err)
	}
}

// concurrentProducerIDs: blocks reserved at once never overlap.
func concurrentProducerIDs(t *testing.T, open func() metadata.Store) {
	s := open()
	const workers, each, size = 4, 8, 10
	var (
		mu     sync.Mutex
		starts []int64
		wg     sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				first, err := s.ReserveProducerIDs(size)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				starts = append(starts, first)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i, first := range starts {
		if first != int64(i*size) {
			t.Fatalf("blocks %v: want %d blocks of %d from 0, none overlapping", starts, workers*each, size)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
