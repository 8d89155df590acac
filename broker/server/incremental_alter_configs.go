package server

// IncrementalAlterConfigs (key 44), versions 0-1: SET, DELETE, APPEND and
// SUBTRACT (list configs: cleanup.policy) on a topic's config overrides,
// validated and applied to the open partitions at once; a resource's
// operations apply all or none. A broker resource may SET or DELETE only
// the replication throttles (broker_configs.go); deleting any other
// config answers NONE, as Kafka answers deleting an unset dynamic config.

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
	if rr.ResourceType == resourceBroker {
		set := map[string]*string{}
		for _, c := range rr.Configs {
			switch int8(c.Op) {
			case incrementalDelete:
				set[c.Name] = nil
			case 0: // SET
				if c.Value == nil {
					return kerr.InvalidConfig.Code, "broker config " + c.Name + ": SET needs a value"
				}
				set[c.Name] = c.Value
			default:
				return kerr.InvalidRequest.Code, "broker config " + c.Name + ": only SET and DELETE apply to a broker's configs"
			}
		}
		return s.alterBrokerConfigs(rr.ResourceName, set, false, req.ValidateOnly)
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
