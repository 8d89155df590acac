package metadata

// Users: the SCRAM credentials of the broker's users.
//
// A user's credentials are a map from mechanism (SCRAM-SHA-256,
// SCRAM-SHA-512) to the stored credential in Kafka's form,
// "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N"
// (broker/security.Credential.String); never a password. FileStore keeps
// them in <data dir>/users.json ({"version":1,"users":{"alice":{...}}},
// replaced atomically); broker/cluster's Store in /config/users/<user> as
// Kafka 2.x did ({"version":1,"config":{"SCRAM-SHA-512":"salt=..."}}).

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
)

// ErrUnknownUser: SetUser deleting the credentials of a user with none.
var ErrUnknownUser = errors.New("metadata: unknown user")

// UserStore holds the users' SCRAM credentials. Both Stores implement it.
// Every method is safe for concurrent use; a change is durable when
// SetUser returns.
type UserStore interface {
	// Users returns every user's credentials (user -> mechanism -> stored form).
	Users() (map[string]map[string]string, error)
	// User returns one user's credentials, nil if the user has none.
	User(name string) (map[string]string, error)
	// SetUser replaces a user's credentials; an empty map removes the user.
	SetUser(name string, creds map[string]string) error
	// UpdateUser changes a user's credentials atomically: change gets the
	// current ones (nil for none; its own copy) and returns the next (empty
	// removes the user; removing one with none is no change) or an error,
	// which UpdateUser returns having written nothing. No other change to
	// the user, by this process or another broker, comes in between: a
	// store that saw one retries with the newer credentials, so change may
	// run more than once.
	UpdateUser(name string, change func(creds map[string]string) (map[string]string, error)) error
}

// MaxUserName is the longest user name stored (Kafka does not bound it;
// ZooKeeper node names and answers do).
const MaxUserName = 1024

const usersFile = "users.json"

type usersFileV1 struct {
	Version int                          `json:"version"`
	Users   map[string]map[string]string `json:"users"`
}

func (s *FileStore) loadUsers() error {
	data, err := readFile(s, usersFile)
	if err != nil || data == nil {
		return err
	}
	var f usersFileV1
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: %s: %v (restore it from a backup; removing it removes every user)", ErrCorrupt, path.Join(s.dir, usersFile), err)
	}
	if f.Version != 1 {
		return fmt.Errorf("%w: %s: version %d not understood (written by a newer sluice?)", ErrCorrupt, path.Join(s.dir, usersFile), f.Version)
	}
	s.users = f.Users
	return nil
}

// Users implements UserStore.
func (s *FileStore) Users() (map[string]map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]map[string]string, len(s.users))
	for u, c := range s.users {
		out[u] = copyCreds(c)
	}
	return out, nil
}

// User implements UserStore.
func (s *FileStore) User(name string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyCreds(s.users[name]), nil
}

// SetUser implements UserStore.
func (s *FileStore) SetUser(name string, creds map[string]string) error {
	if err := checkUserName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.users[name]; len(creds) == 0 && !had {
		return fmt.Errorf("%w: %q", ErrUnknownUser, name)
	}
	return s.setUserLocked(name, creds)
}

// UpdateUser implements UserStore.
func (s *FileStore) UpdateUser(name string, change func(map[string]string) (map[string]string, error)) error {
	if err := checkUserName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := change(copyCreds(s.users[name]))
	if err != nil {
		return err
	}
	if _, had := s.users[name]; len(next) == 0 && !had {
		return nil
	}
	return s.setUserLocked(name, next)
}

func checkUserName(name string) error {
	if name == "" || len(name) > MaxUserName {
		return fmt.Errorf("%w: user name of %d bytes", ErrStorage, len(name))
	}
	return nil
}

func (s *FileStore) setUserLocked(name string, creds map[string]string) error {
	old, had := s.users[name]
	if s.users == nil {
		s.users = map[string]map[string]string{}
	}
	if len(creds) == 0 {
		delete(s.users, name)
	} else {
		s.users[name] = copyCreds(creds)
	}
	data, err := json.MarshalIndent(usersFileV1{Version: 1, Users: s.users}, "", "  ")
	if err == nil {
		err = writeFile(s, usersFile, data)
	}
	if err != nil {
		if had {
			s.users[name] = old
		} else {
			delete(s.users, name)
		}
		return err
	}
	return nil
}

func copyCreds(c map[string]string) map[string]string {
	if len(c) == 0 {
		return nil
	}
	out := make(map[string]string, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// SortedUsers returns the user names of m in order.
func SortedUsers(m map[string]map[string]string) []string {
	out := make([]string, 0, len(m))
	for u := range m {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}
