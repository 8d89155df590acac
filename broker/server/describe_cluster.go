package server

// DescribeCluster (key 60), versions 0-1: on a single node this node is the
// cluster and its controller; in cluster mode every live broker (client
// listener, rack) and the controller as this broker last saw them. v1's EndpointType 2 (controllers) is answered
// UNSUPPORTED_ENDPOINT_TYPE: sluice has no separate controller endpoint.
// Authorized operations are not computed (no ACLs): INT32_MIN.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeCluster(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterAuthorizedOperations = -2147483648
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "sluice serves the broker endpoint type (1) only"
		resp.ErrorMessage = &msg
		return kmsgReply{resp}, nil
	}
	brokers, controller := s.metadataBrokers(rc.conn)
	resp.ClusterID, resp.ControllerID = s.cfg.ClusterID, controller
	for _, mb := range brokers {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = mb.NodeID, mb.Host, mb.Port, mb.Rack
		resp.Brokers = append(resp.Brokers, b)
	}
	return kmsgReply{resp}, nil
}
