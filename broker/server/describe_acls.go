package server

// DescribeAcls (key 29), versions 1-3. Needs DESCRIBE on the cluster.
// The filter is Kafka's: ANY, MATCH (the bindings that apply to a
// resource name), LITERAL or PREFIXED patterns; null name, principal or
// host match all. The answer groups the bindings by resource.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/acl"
)

func handleDescribeAcls(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	switch {
	case s.authz == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr("no authorizer is configured (authorizer.class.name)")
	case !rc.allowedCluster(kmsg.ACLOperationDescribe):
		resp.ErrorCode, resp.ErrorMessage = clusterDenied, kmsg.StringPtr("DescribeAcls needs DESCRIBE on the cluster")
	default:
		if err := f.Validate(); err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			break
		}
		resp.Resources = aclResources(s.authz.a.Describe(f))
	}
	return kmsgReply{resp}, nil
}

// aclResources groups bindings by resource, in their stored order.
func aclResources(bs []acl.Binding) []kmsg.DescribeACLsResponseResource {
	type key struct {
		typ     acl.ResourceType
		name    string
		pattern acl.PatternType
	}
	at := map[key]int{}
	var out []kmsg.DescribeACLsResponseResource
	for _, b := range bs {
		k := key{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := at[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			i = len(out)
			at[k] = i
			out = append(out, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		out[i].ACLs = append(out[i].ACLs, a)
	}
	return out
}
