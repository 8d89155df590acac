package server

// DescribeUserScramCredentials (key 50), version 0: each user's SCRAM
// mechanisms and iteration counts (never a salt or key). No user named (an
// empty or null list) describes every user, up to maxDescribedUsers.
//
// Deviations from Kafka: until ACLs land any client that got past its
// listener's authentication may call it (Kafka needs DESCRIBE on CLUSTER).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/security"
)

// maxDescribedUsers bounds the users of one answer.
const maxDescribedUsers = 100000

// scramMechanismCodes are Kafka's ScramMechanism types.
var scramMechanismCodes = map[int8]string{1: security.ScramSHA256, 2: security.ScramSHA512}

func scramMechanismCode(name string) int8 {
	for code, n := range scramMechanismCodes {
		if n == name {
			return code
		}
	}
	return 0
}

func handleDescribeUserScramCredentials(s *Server, _ *requestContext, req kmsg.Request) (reply, error) {
	r := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if s.users == nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		msg := "this broker's metadata store keeps no users"
		resp.ErrorMessage = &msg
		return kmsgReply{resp}, nil
	}
	describe := func(user string, creds map[string]string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		for _, mech := range []string{security.ScramSHA256, security.ScramSHA512} {
			stored, ok := creds[mech]
			if !ok {
				continue
			}
			c, err := security.ParseCredential(mech, stored)
			if err != nil {
				continue
			}
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramMechanismCode(mech), int32(c.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, info)
		}
		if len(res.CredentialInfos) == 0 {
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist"
			res.ErrorMessage = &msg
		}
		return res
	}
	if len(r.Users) == 0 {
		all, err := s.users.Users()
		if err != nil {
			resp.ErrorCode = kerr.KafkaStorageError.Code
			msg := err.Error()
			resp.ErrorMessage = &msg
			return kmsgReply{resp}, nil
		}
		for _, u := range metadata.SortedUsers(all) {
			if len(resp.Results) == maxDescribedUsers {
				break
			}
			resp.Results = append(resp.Results, describe(u, all[u]))
		}
		return kmsgReply{resp}, nil
	}
	seen := make(map[string]int, len(r.Users))
	for _, u := range r.Users {
		seen[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range r.Users {
		if done[u.Name] || len(resp.Results) == maxDescribedUsers {
			continue
		}
		done[u.Name] = true
		if seen[u.Name] > 1 {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u.Name, kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request"
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
			continue
		}
		creds, err := s.users.User(u.Name)
		if err != nil {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u.Name, kerr.KafkaStorageError.Code
			msg := err.Error()
			res.ErrorMessage = &msg
			resp.Results = append(resp.Results, res)
			continue
		}
		resp.Results = append(resp.Results, describe(u.Name, creds))
	}
	return kmsgReply{resp}, nil
}
