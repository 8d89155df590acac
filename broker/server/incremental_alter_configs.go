package server

// IncrementalAlterConfigs (key 44), versions 0-1: SET, DELETE, APPEND and
// SUBTRACT (list configs: cleanup.policy) on a topic's config overrides,
// validated and applied to the open partitions at once; a resource's
// operations apply all or none. Deviation as AlterConfigs: broker resources
// are refused with INVALID_REQUEST, except a resource whose operations are
// all DELETE: sluice has no dynamic broker configs, so there is nothing to
// delete and the answer is NONE, as Kafka answers deleting an unset dynamic
// config (kafka-reassign-partitions --verify clears its throttles so).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleIncrementalAlterConfigs(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := incrementalAlter(s, rc, req, &rr)
		sr.ErrorCode = code
		if code != 0 {
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return kmsgReply{resp}, nil
}

func incrementalAlter(s *Server, rc *requestContext, req *kmsg.IncrementalAlterConfigsRequest, rr *kmsg.IncrementalAlterConfigsRequestResource) (int16, string) {
	if rr.ResourceType == resourceBroker && onlyDeletes(rr.Configs) {
		return 0, ""
	}
	if rr.ResourceType != resourceTopic {
		return kerr.InvalidRequest.Code, notTopicResource(int8(rr.ResourceType))
	}
	overrides, ok := s.topics.topicConfigs(rr.ResourceName)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, "topic " + rr.ResourceName + " does not exist"
	}
	t, _ := s.topics.get(rr.ResourceName)
	current := map[string]string{}
	for _, e := range s.cfg.TopicEntries(t.overrides) {
		current[e.Name] = e.Value
	}
	seen := map[string]bool{}
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return kerr.InvalidRequest.Code, "config " + c.Name + " is named more than once"
		}
		seen[c.Name] = true
		if err := applyIncremental(overrides, c.Name, int8(c.Op), c.Value, current[c.Name]); err != nil {
			return kerr.InvalidConfig.Code, err.Error()
		}
	}
	code, msg := s.topics.setConfigs(rr.ResourceName, overrides, req.ValidateOnly)
	if code == 0 && !req.ValidateOnly {
		rc.logger.Info("altered topic configs", "topic", rr.ResourceName, "configs", overrides)
	}
	return code, msg
}

// incrementalDelete is IncrementalAlterConfigs' DELETE operation.
const incrementalDelete = 1

func onlyDeletes(cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) bool {
	for _, c := range cs {
		if c.Op != incrementalDelete {
			return false
		}
	}
	return true
}
