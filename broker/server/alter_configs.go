package server

// AlterConfigs (key 33), versions 0-2: replaces a topic's config overrides
// with those given (Kafka's semantics: keys left out return to their
// defaults), validated like CreateTopics' and applied to the open
// partitions at once. A broker resource may set only the replication
// throttles (broker_configs.go); sluice reads every other broker property
// from --config at start.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka config resource types.
const (
	resourceTopic  = 2
	resourceBroker = 4
)

func handleAlterConfigs(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var code int16
		var msg string
		switch rr.ResourceType {
		case resourceBroker:
			set := map[string]*string{}
			for _, c := range rr.Configs {
				set[c.Name] = c.Value
			}
			code, msg = s.alterBrokerConfigs(rr.ResourceName, set, true, req.ValidateOnly)
		case resourceTopic:
			overrides := map[string]string{}
			for _, c := range rr.Configs {
				if c.Value != nil {
					overrides[c.Name] = *c.Value
				}
			}
			code, msg = s.topics.setConfigs(rr.ResourceName, overrides, req.ValidateOnly)
			if code == 0 && !req.ValidateOnly {
				rc.logger.Info("altered topic configs", "topic", rr.ResourceName, "configs", overrides)
			}
		default:
			code, msg = kerr.InvalidRequest.Code, notTopicResource(int8(rr.ResourceType))
		}
		sr.ErrorCode = code
		if code != 0 {
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return kmsgReply{resp}, nil
}

func notTopicResource(t int8) string {
	return "only topic configs and the brokers' replication throttles can be altered"
}
