package server

// DeleteTopics (key 20), versions 1-6.
//
// Topics are named (v1-5: TopicNames; v6: Topics by name or id). Deletion is
// synchronous: the registry entry is removed durably first, then the
// partition directories (a crash in between removes them at the next
// start). delete.topic.enable=false answers TOPIC_DELETION_DISABLED.
// Deviation: TimeoutMillis is ignored.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteTopics(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, target{name: &req.TopicNames[i]})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		fail := func(code int16, msg string) {
			st.ErrorCode, st.ErrorMessage = code, &msg
			resp.Topics = append(resp.Topics, st)
		}
		if !s.cfg.DeleteTopicEnable {
			fail(kerr.TopicDeletionDisabled.Code, "delete.topic.enable is false on this broker")
			continue
		}
		var name string
		switch {
		case tg.name != nil:
			name = *tg.name
		case tg.id != [16]byte{}:
			t, ok := s.topics.byID(tg.id)
			if !ok {
				fail(kerr.UnknownTopicID.Code, "no topic has this id")
				continue
			}
			name = t.name
			st.Topic = &name
		default:
			fail(kerr.InvalidRequest.Code, "neither a topic name nor an id")
			continue
		}
		if t, ok := s.topics.get(name); ok {
			st.TopicID = t.id
		}
		if code, msg := s.topics.delete(name); code != 0 {
			fail(code, msg)
			continue
		}
		rc.logger.Info("deleted topic", "topic", name)
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}
