package server

// AlterUserScramCredentials (key 51), version 0: upsert credentials from a
// salted password the client computed (Kafka's kafka-configs.sh
// --add-config 'SCRAM-SHA-512=[password=...]' sends exactly that), or
// delete a mechanism of a user. The broker derives and stores only the
// stored key and server key (broker/security.Credential); the salted
// password is dropped. One result per user; a user's changes are applied
// together or not at all.
//
// Errors, as Kafka's: an unknown mechanism UNSUPPORTED_SASL_MECHANISM; an
// empty name, an iteration count outside 4096..16384 or a salted password
// of the wrong size UNACCEPTABLE_CREDENTIAL; the same user and mechanism
// twice DUPLICATE_RESOURCE; deleting what does not exist RESOURCE_NOT_FOUND.
//
// Deviations from Kafka: until ACLs land any client that got past its
// listener's authentication may call it (Kafka needs ALTER on CLUSTER).

import (
	"errors"
	"maps"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/security"
)

func handleAlterUserScramCredentials(s *Server, rc *requestContext, req kmsg.Request) (reply, error) {
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type change struct {
		upsert map[string]string // mechanism -> stored credential
		del    map[string]bool
		err    *kerr.Error
		msg    string
	}
	changes := map[string]*change{}
	get := func(user string) *change {
		ch, ok := changes[user]
		if !ok {
			ch = &change{upsert: map[string]string{}, del: map[string]bool{}}
			changes[user] = ch
		}
		return ch
	}
	failWith := func(ch *change, e *kerr.Error, msg string) {
		if ch.err == nil {
			ch.err, ch.msg = e, msg
		}
	}
	for _, d := range r.Deletions {
		ch := get(d.Name)
		mech, ok := scramMechanismCodes[d.Mechanism]
		switch {
		case d.Name == "":
			failWith(ch, kerr.UnacceptableCredential, "Username must not be empty")
		case !ok:
			failWith(ch, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case ch.del[mech]:
			failWith(ch, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		default:
			ch.del[mech] = true
		}
	}
	for _, u := range r.Upsertions {
		ch := get(u.Name)
		mech, ok := scramMechanismCodes[u.Mechanism]
		if u.Name == "" {
			failWith(ch, kerr.UnacceptableCredential, "Username must not be empty")
			continue
		}
		if !ok {
			failWith(ch, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
			continue
		}
		if _, dup := ch.upsert[mech]; dup || ch.del[mech] {
			failWith(ch, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			continue
		}
		c, err := security.CredentialFromSalted(mech, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			failWith(ch, kerr.UnacceptableCredential, err.Error())
			continue
		}
		ch.upsert[mech] = c.String()
	}
	users := make([]string, 0, len(changes))
	for u := range changes {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, user := range users {
		ch := changes[user]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		if ch.err == nil && s.users == nil {
			failWith(ch, kerr.UnsupportedVersion, "this broker's metadata store keeps no users")
		}
		if ch.err == nil {
			if e, msg := s.applyUserChange(user, ch.upsert, ch.del); e != nil {
				failWith(ch, e, msg)
			}
		}
		if ch.err != nil {
			res.ErrorCode = ch.err.Code
			msg := ch.msg
			res.ErrorMessage = &msg
		} else {
			rc.logger.Info("SCRAM credentials altered", "user", user, "by", rc.conn.Principal(), "upserted", len(ch.upsert), "deleted", len(ch.del))
		}
		resp.Results = append(resp.Results, res)
	}
	return kmsgReply{resp}, nil
}

// applyUserChange updates one user's stored credentials, atomically
// against other changes to the user on any broker (UserStore.UpdateUser).
func (s *Server) applyUserChange(user string, upsert map[string]string, del map[string]bool) (*kerr.Error, string) {
	err := s.users.UpdateUser(user, func(creds map[string]string) (map[string]string, error) {
		next := map[string]string{}
		maps.Copy(next, creds)
		for mech := range del {
			if _, ok := next[mech]; !ok {
				return nil, errNoCredential
			}
			delete(next, mech)
		}
		maps.Copy(next, upsert)
		return next, nil
	})
	switch {
	case errors.Is(err, errNoCredential):
		return kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
	case err != nil:
		return kerr.KafkaStorageError, err.Error()
	}
	return nil, ""
}

var errNoCredential = errors.New("no such credential")
