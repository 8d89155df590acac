package server

// Requests for API keys sluice does not serve (transactions, ACLs, quotas,
// replication, KRaft) but that kmsg can decode are answered in the
// request's version with a top-level UNSUPPORTED_VERSION error code, so a
// client that sends one without checking ApiVersions gets a Kafka error
// instead of a closed connection. A key whose response has no top-level
// error code, or that kmsg does not know, still closes the connection.

import (
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unservedAPI labels these answers in the request metrics.
var unservedAPI = &api{key: -1, name: "Unsupported"}

// unsupportedKeyReply builds the error answer, or reports false.
func unsupportedKeyReply(hdr header, body []byte) (reply, bool) {
	req := kmsg.RequestForKey(hdr.key)
	if req == nil || hdr.version < 0 || hdr.version > req.MaxVersion() {
		return nil, false
	}
	req.SetVersion(hdr.version)
	if req.IsFlexible() {
		var ok bool
		if body, ok = skipTags(body); !ok {
			return nil, false
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, false
	}
	resp := req.ResponseKind()
	resp.SetVersion(hdr.version)
	v := reflect.ValueOf(resp).Elem()
	code := v.FieldByName("ErrorCode")
	if !code.IsValid() || code.Kind() != reflect.Int16 || !code.CanSet() {
		return nil, false
	}
	code.SetInt(int64(kerr.UnsupportedVersion.Code))
	if m := v.FieldByName("ErrorMessage"); m.IsValid() && m.CanSet() && m.Type() == reflect.TypeOf((*string)(nil)) {
		msg := fmt.Sprintf("sluice does not serve API key %d (%s)", hdr.key, kmsg.NameForKey(hdr.key))
		m.Set(reflect.ValueOf(&msg))
	}
	return kmsgReply{resp}, true
}
