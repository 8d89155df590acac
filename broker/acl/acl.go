// Package acl is the broker's authorizer: Kafka's ACL model and evaluation,
// so that a Kafka config (authorizer.class.name, super.users,
// allow.everyone.if.no.acl.found) and Kafka's kafka-acls tool work unchanged.
//
// A binding allows or denies one principal ("User:alice", or "User:*"),
// from one host (an address, or "*"), one operation on the resources a
// pattern names: a resource type (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID),
// a pattern type (LITERAL: the name, or "*" for every name; PREFIXED: every
// name starting with it) and a name. Evaluation of (principal, host,
// operation, resource), as Kafka's StandardAuthorizer:
//
//  1. a super user (super.users) is allowed everything;
//  2. a matching DENY binding of the operation or of ALL denies (deny wins);
//  3. a matching ALLOW binding of the operation, of ALL, or of an operation
//     implying it allows: DESCRIBE is implied by READ, WRITE, DELETE and
//     ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS;
//  4. with no binding at all on the resource (for anyone),
//     allow.everyone.if.no.acl.found decides (default false: denied);
//  5. otherwise denied.
//
// The bindings live in the metadata store (metadata.ACLStore); the
// Authorizer keeps a copy, replaced after each change it makes and, in
// cluster mode, whenever the store reports another broker's change
// (metadata.ACLWatcher). Authorize takes a read lock only.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/metadata"
)

// Short names of kmsg's ACL enums, the wire values.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the name (LITERAL), principal and host that match all.
const Wildcard = "*"

// ErrInvalid: a binding or filter that cannot be stored or evaluated; the
// message says which field.
var ErrInvalid = errors.New("acl: invalid")

// Binding is one ACL.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	Principal    string
	Host         string
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permission=%s) on %s:%s:%s",
		b.Principal, b.Host, b.Operation, b.Permission, b.ResourceType, b.PatternType, b.ResourceName)
}

// Validate checks a binding as Kafka's CreateAcls does.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeTransactionalId:
	case kmsg.ACLResourceTypeCluster:
		if b.ResourceName != ClusterName {
			return fmt.Errorf("%w: resource name of a CLUSTER binding must be %s, not %q", ErrInvalid, ClusterName, b.ResourceName)
		}
	case kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: resource type %s: sluice has no delegation tokens; ACLs on them are refused", ErrInvalid, b.ResourceType)
	default:
		return fmt.Errorf("%w: resource type %s: want TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID", ErrInvalid, b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
	case kmsg.ACLResourcePatternTypePrefixed:
		if b.ResourceName == "" {
			return fmt.Errorf("%w: a PREFIXED resource name must not be empty", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: pattern type %s: want LITERAL or PREFIXED", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: resource name is empty", ErrInvalid)
	}
	if len(b.ResourceName) > 4096 || len(b.Principal) > 4096 || len(b.Host) > 1024 {
		return fmt.Errorf("%w: resource name, principal or host too long", ErrInvalid)
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q: want TYPE:NAME, e.g. User:alice", ErrInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: host is empty (use * for every host)", ErrInvalid)
	}
	switch b.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return fmt.Errorf("%w: operation %s cannot be stored", ErrInvalid, b.Operation)
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: operation %d unknown", ErrInvalid, int8(b.Operation))
	}
	if b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny {
		return fmt.Errorf("%w: permission %s: want ALLOW or DENY", ErrInvalid, b.Permission)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls): ANY resource type,
// pattern, operation or permission, and a nil name, principal or host
// match every value. Pattern MATCH with a name selects the bindings that
// apply to that resource: the LITERAL name, the LITERAL "*", and every
// PREFIXED name it starts with.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate checks a filter as Kafka does.
func (f Filter) Validate() error {
	if f.ResourceType < kmsg.ACLResourceTypeAny || f.ResourceType > kmsg.ACLResourceTypeUser {
		return fmt.Errorf("%w: filter resource type %d", ErrInvalid, int8(f.ResourceType))
	}
	if f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed {
		return fmt.Errorf("%w: filter pattern type %d", ErrInvalid, int8(f.PatternType))
	}
	if f.Operation < kmsg.ACLOperationAny || f.Operation > kmsg.ACLOperationDescribeTokens {
		return fmt.Errorf("%w: filter operation %d", ErrInvalid, int8(f.Operation))
	}
	if f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow {
		return fmt.Errorf("%w: filter permission %d", ErrInvalid, int8(f.Permission))
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !patternCovers(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || (f.ResourceName != nil && *f.ResourceName != b.ResourceName) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// patternCovers reports whether b's pattern names the resource name.
func patternCovers(b Binding, name string) bool {
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return b.ResourceName == name || b.ResourceName == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// implies reports whether a binding of op grants want.
func implies(op, want Operation) bool {
	if op == want || op == kmsg.ACLOperationAll {
		return true
	}
	switch want {
	case kmsg.ACLOperationDescribe:
		return op == kmsg.ACLOperationRead || op == kmsg.ACLOperationWrite || op == kmsg.ACLOperationDelete || op == kmsg.ACLOperationAlter
	case kmsg.ACLOperationDescribeConfigs:
		return op == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// toStored is b's stored form.
func toStored(b Binding) metadata.ACL {
	return metadata.ACL{ResourceType: b.ResourceType.String(), ResourceName: b.ResourceName, PatternType: b.PatternType.String(),
		Principal: b.Principal, Host: b.Host, Operation: b.Operation.String(), Permission: b.Permission.String()}
}

// fromStored parses a stored binding.
func fromStored(a metadata.ACL) (Binding, error) {
	var b Binding
	var err error
	if b.ResourceType, err = kmsg.ParseACLResourceType(a.ResourceType); err != nil {
		return b, err
	}
	if b.PatternType, err = kmsg.ParseACLResourcePatternType(a.PatternType); err != nil {
		return b, err
	}
	if b.Operation, err = kmsg.ParseACLOperation(a.Operation); err != nil {
		return b, err
	}
	if b.Permission, err = kmsg.ParseACLPermissionType(a.Permission); err != nil {
		return b, err
	}
	b.ResourceName, b.Principal, b.Host = a.ResourceName, a.Principal, a.Host
	return b, b.Validate()
}
