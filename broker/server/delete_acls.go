package server

// DeleteAcls (key 31), versions 1-3. Needs ALTER on the cluster. Each
// filter (as DescribeAcls's) removes the bindings it selects, all in one
// change of the metadata store, and reports them.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/acl"
)

func handleDeleteAcls(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	results := make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range results {
		results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	resp.Results = results
	fail := func(code int16, msg string) {
		for i := range results {
			if results[i].ErrorCode == 0 {
				results[i].ErrorCode, results[i].ErrorMessage = code, kmsg.StringPtr(msg)
			}
		}
	}
	switch {
	case s.authz == nil:
		fail(kerr.SecurityDisabled.Code, "no authorizer is configured (authorizer.class.name)")
		return kmsgReply{resp}, nil
	case !rc.allowedCluster(kmsg.ACLOperationAlter):
		fail(clusterDenied, "DeleteAcls needs ALTER on the cluster")
		return kmsgReply{resp}, nil
	case len(req.Filters) > maxACLEntries:
		fail(kerr.InvalidRequest.Code, "more than 1000 filters in one request")
		return kmsgReply{resp}, nil
	}
	var fs []acl.Filter
	var idx []int
	for i, rf := range req.Filters {
		f := acl.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if err := f.Validate(); err != nil {
			results[i].ErrorCode, results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		fs, idx = append(fs, f), append(idx, i)
	}
	if len(fs) == 0 {
		return kmsgReply{resp}, nil
	}
	matched, err := s.authz.a.Delete(fs)
	if err != nil {
		rc.logger.Warn("DeleteAcls failed", "err", err)
		for _, i := range idx {
			results[i].ErrorCode, results[i].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		}
		return kmsgReply{resp}, nil
	}
	for j, i := range idx {
		for _, b := range matched[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			results[i].MatchingACLs = append(results[i].MatchingACLs, m)
			rc.logger.Info("ACL deleted", "principal", rc.conn.Principal(), "acl", b.String())
		}
	}
	return kmsgReply{resp}, nil
}
