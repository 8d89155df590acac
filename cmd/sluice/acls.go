package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newACLsCommand) }

// aclFlags are kafka-acls' flags.
type aclFlags struct {
	bootstrap              string
	timeout                time.Duration
	security               *securityFlags
	allowPrincipals        []string
	denyPrincipals         []string
	allowHosts, denyHosts  []string
	principal              string // list only
	operations             []string
	topics, groups, txnIDs []string
	cluster                bool
	patternType            string
	force                  bool
}

// aclResource is one resource the flags name.
type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, t := range f.topics {
		out = append(out, aclResource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, aclResource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range f.txnIDs {
		out = append(out, aclResource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return out
}

func (f *aclFlags) pattern(def kmsg.ACLResourcePatternType) (kmsg.ACLResourcePatternType, error) {
	if f.patternType == "" {
		return def, nil
	}
	p, err := kmsg.ParseACLResourcePatternType(f.patternType)
	if err != nil || p == kmsg.ACLResourcePatternTypeUnknown {
		return 0, fmt.Errorf("acls: --resource-pattern-type %q: use literal, prefixed, any or match", f.patternType)
	}
	return p, nil
}

func (f *aclFlags) ops() ([]kmsg.ACLOperation, error) {
	var out []kmsg.ACLOperation
	for _, o := range f.operations {
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("acls: --operation %q: use Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All", o)
		}
		out = append(out, op)
	}
	return out, nil
}

// entries are the (principal, host, permission) triples of the flags.
type aclEntry struct {
	principal, host string
	permission      kmsg.ACLPermissionType
}

func (f *aclFlags) entries() []aclEntry {
	var out []aclEntry
	add := func(ps, hosts []string, perm kmsg.ACLPermissionType) {
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		for _, p := range ps {
			for _, h := range hosts {
				out = append(out, aclEntry{p, h, perm})
			}
		}
	}
	add(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	add(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	return out
}

func (f *aclFlags) client(ctx context.Context) (*kgo.Client, context.Context, func(), error) {
	sec, err := f.security.security()
	if err != nil {
		return nil, nil, nil, err
	}
	opts, err := kafka.ClientOptions(f.bootstrap, sec)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	return cl, ctx, func() { cancel(); cl.Close() }, nil
}

func newACLsCommand() *cobra.Command {
	f := &aclFlags{}
	cmd := &cobra.Command{
		Use:   "acls",
		Short: "Add, list and remove the broker's ACLs (kafka-acls' flags)",
		Long: `Manage the ACLs of a broker whose authorizer is on (authorizer.class.name), through Kafka's
CreateAcls, DescribeAcls and DeleteAcls APIs, with kafka-acls' flag names:

  sluice acls add --bootstrap B --allow-principal User:alice --operation Write --operation Read --topic orders
  sluice acls add --allow-principal User:alice --operation Read --topic logs- --resource-pattern-type prefixed
  sluice acls add --allow-principal User:alice --operation Read --group g1
  sluice acls list [--topic T] [--principal User:alice]
  sluice acls remove --allow-principal User:alice --operation Write --topic orders --force

The caller needs ALTER on the cluster (add, remove) or DESCRIBE (list), or to be a super user.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT] (kafka-acls' --bootstrap-server)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
	f.security = addSecurityFlags(pf)
	pf.StringArrayVar(&f.allowPrincipals, "allow-principal", nil, "principal to allow, e.g. User:alice (repeatable; User:* is everyone)")
	pf.StringArrayVar(&f.denyPrincipals, "deny-principal", nil, "principal to deny (repeatable)")
	pf.StringArrayVar(&f.allowHosts, "allow-host", nil, "host the allow applies to (default *)")
	pf.StringArrayVar(&f.denyHosts, "deny-host", nil, "host the deny applies to (default *)")
	pf.StringArrayVar(&f.operations, "operation", nil, "operation (repeatable): Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All")
	pf.StringArrayVar(&f.topics, "topic", nil, "topic (repeatable; * is every topic)")
	pf.StringArrayVar(&f.groups, "group", nil, "consumer group (repeatable)")
	pf.StringArrayVar(&f.txnIDs, "transactional-id", nil, "transactional id (repeatable)")
	pf.BoolVar(&f.cluster, "cluster", false, "the cluster resource")
	pf.StringVar(&f.patternType, "resource-pattern-type", "", "literal or prefixed (add, remove: default literal); any or match also for list and remove (list: default any)")

	add := &cobra.Command{Use: "add", Short: "Add ACLs", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.add(c.Context(), c.OutOrStdout()) }}
	list := &cobra.Command{Use: "list", Short: "List ACLs", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.list(c.Context(), c.OutOrStdout()) }}
	list.Flags().StringVar(&f.principal, "principal", "", "list only this principal's ACLs")
	remove := &cobra.Command{Use: "remove", Short: "Remove the ACLs the flags select", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return f.remove(c.Context(), c.InOrStdin(), c.OutOrStdout()) }}
	remove.Flags().BoolVar(&f.force, "force", false, "do not ask for confirmation")
	cmd.AddCommand(add, list, remove)
	return cmd
}

func (f *aclFlags) add(ctx context.Context, out io.Writer) error {
	res := f.resources()
	if len(res) == 0 {
		return errors.New("acls add: name a resource: --topic, --group, --transactional-id or --cluster")
	}
	entries := f.entries()
	if len(entries) == 0 {
		return errors.New("acls add: give --allow-principal or --deny-principal")
	}
	ops, err := f.ops()
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return errors.New("acls add: give at least one --operation")
	}
	pat, err := f.pattern(kmsg.ACLResourcePatternTypeLiteral)
	if err != nil {
		return err
	}
	if pat != kmsg.ACLResourcePatternTypeLiteral && pat != kmsg.ACLResourcePatternTypePrefixed {
		return fmt.Errorf("acls add: --resource-pattern-type %s: use literal or prefixed", f.patternType)
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, r := range res {
		for _, e := range entries {
			for _, op := range ops {
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = r.typ, r.name, pat
				c.Principal, c.Host, c.Operation, c.PermissionType = e.principal, e.host, op, e.permission
				req.Creations = append(req.Creations, c)
			}
		}
	}
	cl, ctx, done, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("acls add: %w", err)
	}
	var errs []error
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			c := req.Creations[i]
			errs = append(errs, fmt.Errorf("acls add: %s %s %s on %s %s: %w%s", c.PermissionType, c.Principal, c.Operation, c.ResourceType, c.ResourceName, err, msgSuffix(r.ErrorMessage)))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(out, "added %d ACLs\n", len(req.Creations))
	return f.list(context.WithoutCancel(ctx), out)
}

func msgSuffix(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return " (" + *m + ")"
}

// filters are the DescribeAcls/DeleteAcls filters of the flags.
func (f *aclFlags) filters(def kmsg.ACLResourcePatternType, principals []aclEntry) ([]kmsg.DeleteACLsRequestFilter, error) {
	pat, err := f.pattern(def)
	if err != nil {
		return nil, err
	}
	ops, err := f.ops()
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	}
	res := f.resources()
	var names []*string
	if len(res) == 0 {
		res = []aclResource{{typ: kmsg.ACLResourceTypeAny}}
	}
	for i := range res {
		if res[i].typ != kmsg.ACLResourceTypeAny {
			names = append(names, &res[i].name)
		} else {
			names = append(names, nil)
		}
	}
	if len(principals) == 0 {
		principals = []aclEntry{{permission: kmsg.ACLPermissionTypeAny}}
	}
	var out []kmsg.DeleteACLsRequestFilter
	for i, r := range res {
		for _, e := range principals {
			for _, op := range ops {
				fl := kmsg.NewDeleteACLsRequestFilter()
				fl.ResourceType, fl.ResourceName, fl.ResourcePatternType = r.typ, names[i], pat
				if e.principal != "" {
					fl.Principal = kmsg.StringPtr(e.principal)
				}
				if e.host != "" {
					fl.Host = kmsg.StringPtr(e.host)
				}
				fl.Operation, fl.PermissionType = op, e.permission
				out = append(out, fl)
			}
		}
	}
	return out, nil
}

func (f *aclFlags) list(ctx context.Context, out io.Writer) error {
	var who []aclEntry
	if f.principal != "" {
		who = []aclEntry{{principal: f.principal, permission: kmsg.ACLPermissionTypeAny}}
	}
	fs, err := f.filters(kmsg.ACLResourcePatternTypeAny, who)
	if err != nil {
		return err
	}
	cl, ctx, done, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer done()
	type key struct {
		typ     kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	byRes := map[key][]string{}
	for _, fl := range fs {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = fl.ResourceType, fl.ResourceName, fl.ResourcePatternType
		req.Principal, req.Host, req.Operation, req.PermissionType = fl.Principal, fl.Host, fl.Operation, fl.PermissionType
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return fmt.Errorf("acls list: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("acls list: %w%s", err, msgSuffix(resp.ErrorMessage))
		}
		for _, r := range resp.Resources {
			k := key{r.ResourceType, r.ResourceName, r.ResourcePatternType}
			for _, a := range r.ACLs {
				line := fmt.Sprintf("\t(principal=%s, host=%s, operation=%s, permissionType=%s)", a.Principal, a.Host, a.Operation, a.PermissionType)
				if !contains(byRes[k], line) {
					byRes[k] = append(byRes[k], line)
				}
			}
		}
	}
	keys := make([]key, 0, len(byRes))
	for k := range byRes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typ != keys[j].typ {
			return keys[i].typ < keys[j].typ
		}
		if keys[i].name != keys[j].name {
			return keys[i].name < keys[j].name
		}
		return keys[i].pattern < keys[j].pattern
	})
	for _, k := range keys {
		fmt.Fprintf(out, "Current ACLs for resource `ResourcePattern(resourceType=%s, name=%s, patternType=%s)`:\n%s\n\n", k.typ, k.name, k.pattern, strings.Join(byRes[k], "\n"))
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (f *aclFlags) remove(ctx context.Context, in io.Reader, out io.Writer) error {
	fs, err := f.filters(kmsg.ACLResourcePatternTypeLiteral, f.entriesForFilter())
	if err != nil {
		return err
	}
	if !f.force {
		fmt.Fprintf(out, "Are you sure you want to remove the ACLs %d filters select? (y/n) ", len(fs))
		var answer string
		if _, err := fmt.Fscanln(in, &answer); err != nil || !strings.EqualFold(strings.TrimSpace(answer), "y") {
			return errors.New("acls remove: not confirmed (answer y, or pass --force)")
		}
	}
	cl, ctx, done, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = fs
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("acls remove: %w", err)
	}
	n := 0
	var errs []error
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("acls remove: %w%s", err, msgSuffix(r.ErrorMessage)))
			continue
		}
		for _, m := range r.MatchingACLs {
			n++
			fmt.Fprintf(out, "removed (principal=%s, host=%s, operation=%s, permissionType=%s) on %s:%s:%s\n", m.Principal, m.Host, m.Operation, m.PermissionType, m.ResourceType, m.ResourcePatternType, m.ResourceName)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(out, "removed %d ACLs\n", n)
	return nil
}

// entriesForFilter: the principals of remove's filter; a host flag only
// when one was given.
func (f *aclFlags) entriesForFilter() []aclEntry {
	var out []aclEntry
	add := func(ps, hosts []string, perm kmsg.ACLPermissionType) {
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, p := range ps {
			for _, h := range hosts {
				out = append(out, aclEntry{p, h, perm})
			}
		}
	}
	add(f.allowPrincipals, f.allowHosts, kmsg.ACLPermissionTypeAllow)
	add(f.denyPrincipals, f.denyHosts, kmsg.ACLPermissionTypeDeny)
	return out
}
