package config

// The authorizer's properties, with Kafka's names:
//
//	authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
//	super.users=User:admin;User:ops
//	allow.everyone.if.no.acl.found=false
//
// authorizer.class.name turns the ACL authorizer (broker/acl) on; Kafka's
// two class names and sluice's own are accepted, any other is an error.
// Unset, every request is allowed.

import (
	"fmt"
	"strings"
)

// AuthorizerClassNames are the accepted values of authorizer.class.name.
var AuthorizerClassNames = []string{
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"kafka.security.authorizer.AclAuthorizer",
	"sluice.acl.Authorizer",
}

// Authorizer is the authorizer's part of Security.
type Authorizer struct {
	ClassName                 string   // authorizer.class.name; "" = no authorizer
	SuperUsers                []string // super.users
	AllowEveryoneIfNoACLFound bool     // allow.everyone.if.no.acl.found
}

// Enabled reports whether requests are authorized.
func (a Authorizer) Enabled() bool { return a.ClassName != "" }

var authorizerKeys = map[string]bool{"authorizer.class.name": true, "super.users": true, "allow.everyone.if.no.acl.found": true}

func parseAuthorizer(props map[string]string) (Authorizer, error) {
	var a Authorizer
	if v := strings.TrimSpace(props["authorizer.class.name"]); v != "" {
		ok := false
		for _, n := range AuthorizerClassNames {
			ok = ok || v == n
		}
		if !ok {
			return a, fmt.Errorf("%w: authorizer.class.name=%s: not an authorizer sluice has; use one of %s", ErrInvalid, v, strings.Join(AuthorizerClassNames, ", "))
		}
		a.ClassName = v
	}
	for _, p := range strings.Split(props["super.users"], ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return a, fmt.Errorf("%w: super.users: %q: want TYPE:NAME entries separated by ';', e.g. User:admin;User:ops", ErrInvalid, p)
		}
		a.SuperUsers = append(a.SuperUsers, p)
	}
	if v, ok := props["allow.everyone.if.no.acl.found"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			a.AllowEveryoneIfNoACLFound = true
		case "false":
		default:
			return a, fmt.Errorf("%w: allow.everyone.if.no.acl.found=%q: want true or false", ErrInvalid, v)
		}
	}
	return a, nil
}
