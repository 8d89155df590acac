package server

// AlterConfigs (key 33), versions 0-2: replaces a topic's config overrides
// with those given (Kafka's semantics: keys left out return to their
// defaults), validated like CreateTopics' and applied to the open
// partitions at once. Deviation: broker resources are refused with
// INVALID_REQUEST — sluice reads broker properties from --config at start,
// it has no dynamic broker configs.

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
		if rr.ResourceType != resourceTopic {
			code, msg = kerr.InvalidRequest.Code, notTopicResource(int8(rr.ResourceType))
		} else {
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
	if t == resourceBroker {
		return "sluice has no dynamic broker configs: set broker properties in the --config file and restart"
	}
	return "only topic configs can be altered"
}
