package server

// SaslAuthenticate (key 36), versions 0-2: one step of the SASL exchange
// begun by SaslHandshake v1 (PLAIN: one step; SCRAM: two). The last step's
// answer carries session_lifetime_ms (v1+) when connections.max.reauth.ms
// is set. A failed step is answered with SASL_AUTHENTICATION_FAILED and a
// message naming the mechanism (never the password or why exactly: a wrong
// password and an unknown user read alike), then the connection is closed.
//
// Deviations from Kafka: none known.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSaslAuthenticate(_ *Server, rc *requestContext, req kmsg.Request) (reply, error) {
	r := req.(*kmsg.SASLAuthenticateRequest)
	c := rc.conn
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if !c.l.sasl || c.auth.conv == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake"
		resp.ErrorMessage = &msg
		if !c.l.sasl || !c.needsAuth() {
			// A listener without SASL, or a connection already
			// authenticated: Kafka's KafkaApis answers the error and the
			// connection goes on.
			return kmsgReply{resp}, nil
		}
		return thenClose{kmsgReply{resp}, fmt.Errorf("%w: %s", errUnauthenticated, msg)}, nil
	}
	mech := c.auth.mechanism
	answer, lifetime, _, err := c.stepSASL(r.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
		resp.ErrorMessage = &msg
		if !errors.Is(err, errUnauthenticated) {
			err = fmt.Errorf("%w: %w", errUnauthenticated, err)
		}
		return thenClose{kmsgReply{resp}, err}, nil
	}
	resp.SASLAuthBytes = answer
	if answer == nil {
		resp.SASLAuthBytes = []byte{}
	}
	resp.SessionLifetimeMillis = lifetime
	return kmsgReply{resp}, nil
}
