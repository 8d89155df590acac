package server

// CreateAcls (key 30), versions 1-3 (v0, without pattern types, is gone
// from Kafka 4 too). Needs ALTER on the cluster. Each creation is
// validated on its own (INVALID_REQUEST naming the field, or
// SECURITY_DISABLED when no authorizer is configured); the valid ones are
// stored in one change of the metadata store.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/acl"
)

// maxACLEntries bounds the creations or filters of one request.
const maxACLEntries = 1000

func handleCreateAcls(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	results := make([]kmsg.CreateACLsResponseResult, len(req.Creations))
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
	case !rc.allowedCluster(kmsg.ACLOperationAlter):
		fail(clusterDenied, "CreateAcls needs ALTER on the cluster")
	case len(req.Creations) > maxACLEntries:
		fail(kerr.InvalidRequest.Code, "more than 1000 creations in one request")
	default:
		var bs []acl.Binding
		var idx []int
		for i, c := range req.Creations {
			b := acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
				Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
			if err := b.Validate(); err != nil {
				results[i].ErrorCode, results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
				continue
			}
			bs, idx = append(bs, b), append(idx, i)
		}
		if len(bs) > 0 {
			if err := s.authz.a.Create(bs); err != nil {
				code := kerr.UnknownServerError.Code
				if errors.Is(err, acl.ErrInvalid) {
					code = kerr.InvalidRequest.Code
				}
				rc.logger.Warn("CreateAcls failed", "err", err)
				for _, i := range idx {
					results[i].ErrorCode, results[i].ErrorMessage = code, kmsg.StringPtr(err.Error())
				}
			} else {
				for _, b := range bs {
					rc.logger.Info("ACL created", "principal", rc.conn.Principal(), "acl", b.String())
				}
			}
		}
	}
	resp.Results = results
	return kmsgReply{resp}, nil
}
