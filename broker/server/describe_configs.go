package server

// DescribeConfigs (key 32), versions 1-4.
//
// Topic resources (type 2) report every supported topic config with its
// effective value and source (dynamic topic override, static broker
// property, or default); broker resources (type 4, name "" or this node's
// id) report the supported broker properties. ConfigNames filters;
// IncludeDocumentation (v3+) adds one-line docs; ConfigType (v3+) is
// Kafka's type of the key. Deviations: no synonyms
// are reported, nothing is sensitive, broker-logger resources are
// INVALID_REQUEST.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

func handleDescribeConfigs(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var entries []config.Entry
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := s.topics.get(r.ResourceName)
			if !ok {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				msg := "topic " + r.ResourceName + " does not exist"
				rr.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			entries = s.cfg.TopicEntries(t.overrides)
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				msg := "unknown broker " + r.ResourceName
				rr.ErrorMessage = &msg
				resp.Resources = append(resp.Resources, rr)
				continue
			}
			entries = s.cfg.Entries()
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + strconv.Itoa(int(r.ResourceType))
			rr.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		want := map[string]bool{}
		for _, n := range r.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if r.ConfigNames != nil && !want[e.Name] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := e.Value
			c.Name, c.Value = e.Name, &v
			c.Source = kmsg.ConfigSource(e.Source)
			c.IsDefault = e.IsDefault
			if req.IncludeDocumentation {
				d := e.Doc
				c.Documentation = &d
			}
			c.ConfigType = kmsg.ConfigType(e.Type)
			rr.Configs = append(rr.Configs, c)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return kmsgReply{resp}, nil
}
