package server

// ApiVersions (key 18), versions 0-4. v4 has v3's layout (it only lifts
// the rule that a supported feature's MinVersion is at least 1); serving it
// spares clients that start with v4, such as the Java client 4.x, a refused
// request and a second round trip on every new connection before their first
// request.
//
// Deviations from Kafka: no finalized/supported features (v3 tagged fields)
// are reported. A request newer than v4 is answered in v0 with
// UNSUPPORTED_VERSION and the key list, as Kafka does, so the client can
// retry with a version we serve.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.advertisedMin, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func handleAPIVersions(_ *Server, _ *requestContext, req kmsg.Request) (reply, error) {
	return kmsgReply{apiVersionsResponse(req.GetVersion())}, nil
}

// v0Reply writes a response in version 0 whatever the request's version.
type v0Reply struct{ resp kmsg.Response }

func (r v0Reply) write(c *conn, hdr header) error {
	r.resp.SetVersion(0)
	buf := make([]byte, 4, 256)
	buf = appendResponseHeader(buf, hdr, false)
	buf = r.resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return c.write(buf)
}

func unsupportedAPIVersions() reply {
	resp := apiVersionsResponse(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	return v0Reply{resp}
}
