package server

// SaslHandshake (key 17), versions 0-1. v1 is followed by SaslAuthenticate
// requests; after v0 the client sends bare size-prefixed SASL tokens and
// gets bare tokens back (Kafka's original framing, still used by some
// clients), handled by conn.rawToken.
//
// Deviations from Kafka: none known. On a listener without SASL the answer
// is ILLEGAL_SASL_STATE and the connection stays open, as Kafka does. An unsupported mechanism is answered with
// UNSUPPORTED_SASL_MECHANISM and the listener's mechanisms, then the
// connection is closed (Kafka closes it too).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

func handleSaslHandshake(_ *Server, rc *requestContext, req kmsg.Request) (reply, error) {
	r := req.(*kmsg.SASLHandshakeRequest)
	c := rc.conn
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if !c.l.sasl {
		// As Kafka's KafkaApis answers it on a listener without SASL: an
		// error, and the connection goes on.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return kmsgReply{resp}, nil
	}
	resp.SupportedMechanisms = c.l.mechanisms
	if c.auth.conv != nil || (r.Version == 0 && !c.needsAuth()) {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return thenClose{kmsgReply{resp}, fmt.Errorf("%w: SaslHandshake during an exchange (or v0 re-authentication)", errUnauthenticated)}, nil
	}
	if err := c.startSASL(r.Mechanism); err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return thenClose{kmsgReply{resp}, fmt.Errorf("%w: %v", errUnauthenticated, err)}, nil
	}
	c.auth.rawTokens = r.Version == 0
	return kmsgReply{resp}, nil
}
