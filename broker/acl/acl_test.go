package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/internal/vfs"
)

func openStore(t *testing.T, fs vfs.FS) *metadata.FileStore {
	t.Helper()
	if err := fs.MkdirAll("/data"); err != nil {
		t.Fatal(err)
	}
	st, err := metadata.OpenFileStore(fs, "/data")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func allow(typ ResourceType, pattern PatternType, name, principal string, op Operation) Binding {
	return Binding{ResourceType: typ, ResourceName: name, PatternType: pattern, Principal: principal, Host: Wildcard, Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(b Binding) Binding { b.Permission = kmsg.ACLPermissionTypeDeny; return b }

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	cluster = kmsg.ACLResourceTypeCluster
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
)

// TestEvaluation: Kafka's rules, one case each; the bindings survive a
// reopen of the store.
func TestEvaluation(t *testing.T) {
	fs := vfs.NewMem()
	a, err := New(Options{Store: openStore(t, fs), SuperUsers: []string{"User:root"}})
	if err != nil {
		t.Fatal(err)
	}
	bs := []Binding{
		allow(topic, literal, "orders", "User:alice", kmsg.ACLOperationWrite),
		allow(topic, prefix, "logs-", "User:alice", kmsg.ACLOperationRead),
		deny(allow(topic, literal, "logs-secret", "User:alice", kmsg.ACLOperationRead)),
		allow(topic, literal, "*", "User:*", kmsg.ACLOperationDescribeConfigs),
		allow(topic, literal, "cfg", "User:bob", kmsg.ACLOperationAlterConfigs),
		allow(group, literal, "g", "User:bob", kmsg.ACLOperationAll),
		deny(allow(group, literal, "g", "User:bob", kmsg.ACLOperationDelete)),
		{ResourceType: cluster, ResourceName: ClusterName, PatternType: literal, Principal: "User:ops", Host: "10.0.0.1", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow},
	}
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			t.Fatalf("%v: %v", b, err)
		}
	}
	if err := a.Create(bs); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Authorizer{a, mustNew(t, Options{Store: openStore(t, fs), SuperUsers: []string{"User:root"}})} {
		for _, c := range []struct {
			principal, host string
			op              Operation
			typ             ResourceType
			name            string
			want            bool
		}{
			{"User:alice", "1.2.3.4", kmsg.ACLOperationWrite, topic, "orders", true},
			{"User:alice", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "orders", true}, // implied by Write
			{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "orders", false},
			{"User:alice", "1.2.3.4", kmsg.ACLOperationDelete, topic, "orders", false},
			{"User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "orders", false},
			{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "logs-a", true},       // prefixed
			{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "logs-secret", false}, // deny wins
			{"User:alice", "1.2.3.4", kmsg.ACLOperationDescribe, topic, "logs-secret", true},
			{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, topic, "log", false},
			{"User:carol", "1.2.3.4", kmsg.ACLOperationDescribeConfigs, topic, "anything", true}, // User:* and *
			{"User:bob", "1.2.3.4", kmsg.ACLOperationDescribeConfigs, topic, "cfg", true},
			{"User:bob", "1.2.3.4", kmsg.ACLOperationAlterConfigs, topic, "other", false},
			{"User:bob", "1.2.3.4", kmsg.ACLOperationRead, group, "g", true}, // All
			{"User:bob", "1.2.3.4", kmsg.ACLOperationDelete, group, "g", false},
			{"User:ops", "10.0.0.1", kmsg.ACLOperationAlter, cluster, ClusterName, true},
			{"User:ops", "10.0.0.2", kmsg.ACLOperationAlter, cluster, ClusterName, false}, // host
			{"User:root", "1.2.3.4", kmsg.ACLOperationDelete, topic, "orders", true},      // super user
			{"User:alice", "1.2.3.4", kmsg.ACLOperationRead, group, "nobody-named-it", false},
		} {
			if got := a.Authorize(c.principal, c.host, c.op, c.typ, c.name); got != c.want {
				t.Errorf("%s from %s %s on %s %s: %v, want %v", c.principal, c.host, c.op, c.typ, c.name, got, c.want)
			}
		}
		if !a.AuthorizeAny("User:alice", "1.2.3.4", kmsg.ACLOperationWrite, topic) || a.AuthorizeAny("User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic) {
			t.Error("AuthorizeAny: alice has Write on some topic, bob on none")
		}
	}
}

func mustNew(t *testing.T, o Options) *Authorizer {
	t.Helper()
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAllowEveryoneIfNoACLFound: only a resource no binding names is open.
func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	a := mustNew(t, Options{Store: openStore(t, vfs.NewMem()), AllowEveryoneIfNoACLFound: true})
	if err := a.Create([]Binding{allow(topic, prefix, "private-", "User:alice", kmsg.ACLOperationRead)}); err != nil {
		t.Fatal(err)
	}
	if !a.Authorize("User:bob", "h", kmsg.ACLOperationWrite, topic, "public") {
		t.Error("bob on a topic no ACL names: denied")
	}
	if a.Authorize("User:bob", "h", kmsg.ACLOperationRead, topic, "private-x") {
		t.Error("bob on a topic a prefixed ACL names: allowed")
	}
}

// TestFilters: Kafka's filter semantics for DescribeAcls and DeleteAcls.
func TestFilters(t *testing.T) {
	a := mustNew(t, Options{Store: openStore(t, vfs.NewMem())})
	bs := []Binding{
		allow(topic, literal, "orders", "User:alice", kmsg.ACLOperationWrite),
		allow(topic, literal, "*", "User:alice", kmsg.ACLOperationDescribe),
		allow(topic, prefix, "ord", "User:bob", kmsg.ACLOperationRead),
		allow(group, literal, "orders", "User:alice", kmsg.ACLOperationRead),
	}
	if err := a.Create(append(bs, bs[0])); err != nil { // a duplicate is stored once
		t.Fatal(err)
	}
	name := func(s string) *string { return &s }
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 4},
		{Filter{ResourceType: topic, ResourceName: name("orders"), PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 3},
		{Filter{ResourceType: topic, ResourceName: name("orders"), PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 1},
		{Filter{ResourceType: topic, ResourceName: name("ord"), PatternType: prefix, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 1},
		{Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Principal: name("User:alice"), Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 3},
		{Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeDeny}, 0},
	} {
		if got := len(a.Describe(c.f)); got != c.want {
			t.Errorf("filter %+v: %d bindings, want %d", c.f, got, c.want)
		}
	}
	matched, err := a.Delete([]Filter{{ResourceType: topic, ResourceName: name("orders"), PatternType: kmsg.ACLResourcePatternTypeMatch, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	if err != nil || len(matched[0]) != 3 {
		t.Fatalf("delete MATCH orders: %v, %d deleted, want 3", err, len(matched[0]))
	}
	if left := a.Describe(Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}); len(left) != 1 || left[0].ResourceType != group {
		t.Fatalf("left after delete: %v", left)
	}
}

// TestValidate: bindings Kafka refuses are refused, naming the field.
func TestValidate(t *testing.T) {
	good := allow(topic, literal, "t", "User:alice", kmsg.ACLOperationRead)
	for name, b := range map[string]Binding{
		"cluster name":     {ResourceType: cluster, ResourceName: "x", PatternType: literal, Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow},
		"delegation token": func() Binding { b := good; b.ResourceType = kmsg.ACLResourceTypeDelegationToken; return b }(),
		"match pattern":    func() Binding { b := good; b.PatternType = kmsg.ACLResourcePatternTypeMatch; return b }(),
		"principal":        func() Binding { b := good; b.Principal = "alice"; return b }(),
		"operation any":    func() Binding { b := good; b.Operation = kmsg.ACLOperationAny; return b }(),
		"permission any":   func() Binding { b := good; b.Permission = kmsg.ACLPermissionTypeAny; return b }(),
		"empty host":       func() Binding { b := good; b.Host = ""; return b }(),
	} {
		if err := b.Validate(); err == nil {
			t.Errorf("%s: %v accepted", name, b)
		}
	}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}
