package acl

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/metadata"
)

// Options configure an Authorizer.
type Options struct {
	Store metadata.ACLStore
	// SuperUsers are allowed everything (super.users: "User:admin;User:ops").
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found: a
	// resource no binding names is open to all.
	AllowEveryoneIfNoACLFound bool
}

// Authorizer evaluates requests against the stored bindings. Safe for
// concurrent use.
type Authorizer struct {
	store       metadata.ACLStore
	super       map[string]bool
	allowIfNone bool

	// writeMu serialises Create and Delete (and their cache refresh).
	writeMu sync.Mutex

	mu    sync.RWMutex // guards the index
	index *index
}

// index is the bindings arranged for evaluation.
type index struct {
	all      []Binding
	literal  map[resource][]Binding     // LITERAL bindings by type and name ("*" included)
	prefixed map[ResourceType][]Binding // PREFIXED bindings by type
	byType   map[ResourceType][]Binding // every binding of a type
}

type resource struct {
	typ  ResourceType
	name string
}

func newIndex(bs []Binding) *index {
	ix := &index{all: bs, literal: map[resource][]Binding{}, prefixed: map[ResourceType][]Binding{}, byType: map[ResourceType][]Binding{}}
	for _, b := range bs {
		if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
			ix.prefixed[b.ResourceType] = append(ix.prefixed[b.ResourceType], b)
		} else {
			k := resource{b.ResourceType, b.ResourceName}
			ix.literal[k] = append(ix.literal[k], b)
		}
		ix.byType[b.ResourceType] = append(ix.byType[b.ResourceType], b)
	}
	return ix
}

// New loads the stored bindings.
func New(opts Options) (*Authorizer, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("acl: the metadata store keeps no ACLs")
	}
	a := &Authorizer{store: opts.Store, super: map[string]bool{}, allowIfNone: opts.AllowEveryoneIfNoACLFound}
	for _, u := range opts.SuperUsers {
		a.super[u] = true
	}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload re-reads the bindings from the store (another broker changed them).
func (a *Authorizer) Reload() error {
	stored, err := a.store.ACLs()
	if err != nil {
		return fmt.Errorf("acl: read the ACLs: %w", err)
	}
	bs, err := parseStored(stored)
	if err != nil {
		return err
	}
	a.setIndex(newIndex(bs))
	return nil
}

func parseStored(stored []metadata.ACL) ([]Binding, error) {
	bs := make([]Binding, 0, len(stored))
	for i, s := range stored {
		b, err := fromStored(s)
		if err != nil {
			return nil, fmt.Errorf("%w: stored ACL %d: %v", metadata.ErrCorrupt, i, err)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

func (a *Authorizer) setIndex(ix *index) {
	a.mu.Lock()
	a.index = ix
	a.mu.Unlock()
}

func (a *Authorizer) current() *index {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.index
}

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize decides whether principal, connected from host, may do op on
// the resource (typ, name).
func (a *Authorizer) Authorize(principal, host string, op Operation, typ ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	ix := a.current()
	found, allowed := false, false
	check := func(bs []Binding) bool { // false: denied
		for _, b := range bs {
			found = true
			if !principalMatches(b.Principal, principal) || !hostMatches(b.Host, host) {
				continue
			}
			if b.Permission == kmsg.ACLPermissionTypeDeny {
				if b.Operation == op || b.Operation == kmsg.ACLOperationAll {
					return false
				}
				continue
			}
			if implies(b.Operation, op) {
				allowed = true
			}
		}
		return true
	}
	if !check(ix.literal[resource{typ, name}]) {
		return false
	}
	if name != Wildcard && !check(ix.literal[resource{typ, Wildcard}]) {
		return false
	}
	for _, b := range ix.prefixed[typ] {
		if strings.HasPrefix(name, b.ResourceName) && !check([]Binding{b}) {
			return false
		}
	}
	if allowed {
		return true
	}
	return !found && a.allowIfNone
}

// AuthorizeAny decides whether principal may do op on some resource of
// typ (Kafka's authorizeByResourceType: InitProducerId without a
// transactional id asks for WRITE on any topic): an ALLOW binding of the
// operation for the principal and host, not cancelled by a DENY of it on
// every name ("*").
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, typ ResourceType) bool {
	if a.super[principal] {
		return true
	}
	ix := a.current()
	bs := ix.byType[typ]
	if len(bs) == 0 {
		return a.allowIfNone
	}
	allowed := false
	for _, b := range bs {
		if !principalMatches(b.Principal, principal) || !hostMatches(b.Host, host) || (b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			continue
		}
		if b.Permission == kmsg.ACLPermissionTypeDeny {
			if b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName == Wildcard {
				return false
			}
			continue
		}
		allowed = true
	}
	return allowed
}

func principalMatches(bound, principal string) bool {
	return bound == principal || bound == "User:"+Wildcard
}

func hostMatches(bound, host string) bool { return bound == Wildcard || bound == host }

// Describe returns the bindings f selects.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.current().all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Create stores bindings (each already valid); one that exists is left as
// it is. Every broker enforces them once Create returns (this one at once,
// others when their watch fires).
func (a *Authorizer) Create(bs []Binding) error {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	var next []Binding
	err := a.store.UpdateACLs(func(cur []metadata.ACL) ([]metadata.ACL, error) {
		have, err := parseStored(cur)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if !slices.Contains(have, b) {
				have = append(have, b)
				cur = append(cur, toStored(b))
			}
		}
		if len(cur) > metadata.MaxACLs {
			return nil, fmt.Errorf("%w: %d ACLs, more than the %d a broker stores", ErrInvalid, len(cur), metadata.MaxACLs)
		}
		next = have
		return cur, nil
	})
	if err != nil {
		return err
	}
	a.setIndex(newIndex(next))
	return nil
}

// Delete removes the bindings each filter selects and returns them, per
// filter (a binding two filters select is reported under both).
func (a *Authorizer) Delete(fs []Filter) ([][]Binding, error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	var matched [][]Binding
	var next []Binding
	err := a.store.UpdateACLs(func(cur []metadata.ACL) ([]metadata.ACL, error) {
		have, err := parseStored(cur)
		if err != nil {
			return nil, err
		}
		matched = make([][]Binding, len(fs))
		next = next[:0]
		var kept []metadata.ACL
		for _, b := range have {
			hit := false
			for i, f := range fs {
				if f.Matches(b) {
					matched[i] = append(matched[i], b)
					hit = true
				}
			}
			if !hit {
				next = append(next, b)
				kept = append(kept, toStored(b))
			}
		}
		return kept, nil
	})
	if err != nil {
		return nil, err
	}
	a.setIndex(newIndex(next))
	return matched, nil
}
