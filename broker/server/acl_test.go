package server

import (
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// aclProps: a PLAINTEXT listener (User:ANONYMOUS, made a super user: the
// test's admin) and a SASL_PLAINTEXT one for the users under test.
func aclProps(extra map[string]string) map[string]string {
	p := map[string]string{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"authorizer.class.name":   "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":             "User:ANONYMOUS;User:root",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// userClient is a SCRAM-SHA-512 client of the SASL_PLAINTEXT listener.
func (ss *secureServer) userClient(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, ss.addrs["SASL_PLAINTEXT"], append([]kgo.Opt{scramOpt("SCRAM-SHA-512", user, user+"-secret"),
		kgo.RetryTimeout(3 * time.Second), kgo.RequestRetries(2)}, opts...)...)
}

func (ss *secureServer) admin(t *testing.T) *kadm.Client {
	return kadm.NewClient(newClient(t, ss.addrs["PLAINTEXT"]))
}

func createACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(testCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %s %s: %v (%s)", r.Principal, r.Name, r.Err, r.ErrMessage)
		}
	}
}

func createTopics(t *testing.T, adm *kadm.Client, names ...string) {
	t.Helper()
	res, err := adm.CreateTopics(testCtx(t), 1, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
}

func produceErr(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

// fetchErr fetches partition 0 of topic from offset 0 (no group) and
// returns the partition's error.
func fetchErr(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func joinErr(t *testing.T, cl *kgo.Client, group string) error {
	t.Helper()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, 10000, 10000, "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	resp, err := req.RequestWith(testCtx(t), cl.SeedBrokers()[0]) // straight to the broker: no FindCoordinator first
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode == kerr.MemberIDRequired.Code {
		return nil // past the authorizer: the coordinator's first answer
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

func listedTopics(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mt := range resp.Topics {
		out = append(out, *mt.Topic)
	}
	slices.Sort(out)
	return out
}

// TestACLsFranzGo: with the authorizer on, franz-go clients are held to
// their ACLs: no Write, no produce; no Read, no fetch and no JoinGroup;
// no Describe, the topic is not listed; no Delete, no DeleteTopics;
// prefixed ACLs; a DENY beats a matching ALLOW; super users do anything;
// each denial is counted.
func TestACLsFranzGo(t *testing.T) {
	ss := startSecureServer(t, nil, aclProps(nil))
	for _, u := range []string{"alice", "bob", "root"} {
		ss.addUser(t, u, u+"-secret")
	}
	adm := ss.admin(t)
	createTopics(t, adm, "orders", "logs-a", "logs-b", "secret")
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Groups("g1").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("logs-").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed))
	createACLs(t, adm, kadm.NewACLs().Deny("User:alice").Topics("logs-a").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))

	alice := ss.userClient(t, "alice")
	bob := ss.userClient(t, "bob")
	root := ss.userClient(t, "root")

	if err := produceErr(t, alice, "orders"); err != nil {
		t.Fatalf("alice produce to orders (WRITE allowed): %v", err)
	}
	if err := produceErr(t, bob, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produce to orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := produceErr(t, alice, "logs-b"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce to logs-b (READ only): %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := fetchErr(t, alice, "orders"); err != nil {
		t.Fatalf("alice fetch orders: %v", err)
	}
	if err := fetchErr(t, alice, "logs-b"); err != nil {
		t.Fatalf("alice fetch logs-b (prefixed READ): %v", err)
	}
	if err := fetchErr(t, alice, "logs-a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice fetch logs-a (DENY beats the prefixed ALLOW): %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := fetchErr(t, bob, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob fetch orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := joinErr(t, alice, "g1"); err != nil {
		t.Fatalf("alice join g1: %v", err)
	}
	if err := joinErr(t, alice, "g2"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice join g2: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g2", []string{"g2", "g1"}
	if resp, err := fc.RequestWith(testCtx(t), alice.SeedBrokers()[0]); err != nil || len(resp.Coordinators) != 2 {
		t.Fatalf("FindCoordinator: %v %+v", err, resp)
	} else {
		for _, c := range resp.Coordinators {
			if want := map[string]int16{"g1": 0, "g2": kerr.GroupAuthorizationFailed.Code}[c.Key]; c.ErrorCode != want {
				t.Fatalf("FindCoordinator %s: error %d, want %d", c.Key, c.ErrorCode, want)
			}
		}
	}
	// A consumer group end to end: alice reads orders in g1.
	cons := ss.userClient(t, "alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollRecords(testCtx(t), 1)
	if errs := fs.Errors(); len(errs) > 0 || fs.NumRecords() == 0 {
		t.Fatalf("alice consuming orders in g1: %v records, errors %v", fs.NumRecords(), errs)
	}

	if got, want := listedTopics(t, alice), []string{"logs-a", "logs-b", "orders"}; !slices.Equal(got, want) {
		t.Fatalf("alice's Metadata lists %v, want %v (secret hidden: no DESCRIBE)", got, want)
	}
	if got := listedTopics(t, bob); len(got) != 0 {
		t.Fatalf("bob's Metadata lists %v, want none", got)
	}
	if got := len(listedTopics(t, root)); got != 5 { // and __consumer_offsets
		t.Fatalf("root (super user) sees %d topics, want 5", got)
	}

	// Auto-creation needs CREATE: WRITE on a topic that does not exist
	// yet is not enough (Metadata and Produce alike).
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("fresh").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fresh")}}
	if resp, err := md.RequestWith(testCtx(t), alice.SeedBrokers()[0]); err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alice's auto-creating Metadata for fresh without CREATE: %v %+v", err, resp)
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = 1, 5000
	pr.Topics = []kmsg.ProduceRequestTopic{{Topic: "fresh", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: makeBatch(-1, -1, -1, 1, "v")}}}}
	if resp, err := pr.RequestWith(testCtx(t), alice.SeedBrokers()[0]); err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alice's Produce to fresh without CREATE: %v %+v", err, resp)
	}
	if got := listedTopics(t, root); slices.Contains(got, "fresh") {
		t.Fatalf("fresh was auto-created without CREATE: %v", got)
	}

	aliceAdm := kadm.NewClient(alice)
	res, err := aliceAdm.DeleteTopics(testCtx(t), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := res["orders"].Err; !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice delete orders without DELETE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	cr, err := aliceAdm.CreateACLs(testCtx(t), kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(cr) != 1 || !errors.Is(cr[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice CreateAcls without ALTER on the cluster: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, cr)
	}
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpDelete).ResourcePatternType(kadm.ACLPatternLiteral))
	if res, err = aliceAdm.DeleteTopics(testCtx(t), "orders"); err != nil || res["orders"].Err != nil {
		t.Fatalf("alice delete orders with DELETE: %v %v", err, res["orders"].Err)
	}
	rootRes, err := kadm.NewClient(root).DeleteTopics(testCtx(t), "secret")
	if err != nil || rootRes["secret"].Err != nil {
		t.Fatalf("root (super user) delete secret without any ACL: %v %v", err, rootRes["secret"].Err)
	}

	rec := httptest.NewRecorder()
	ss.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`sluice_authorization_denials_total{operation="WRITE",resource_type="TOPIC"}`,
		`sluice_authorization_denials_total{operation="READ",resource_type="GROUP"}`,
		`sluice_authorization_denials_total{operation="DELETE",resource_type="TOPIC"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestACLsAllowEveryoneIfNoACLFound: with allow.everyone.if.no.acl.found,
// a topic no ACL names is open to all, one with an ACL only to whom it
// allows; without it (default), a topic with no ACL is closed.
func TestACLsAllowEveryoneIfNoACLFound(t *testing.T) {
	for _, open := range []bool{true, false} {
		extra := map[string]string{}
		if open {
			extra["allow.everyone.if.no.acl.found"] = "true"
		}
		ss := startSecureServer(t, nil, aclProps(extra))
		ss.addUser(t, "alice", "alice-secret")
		ss.addUser(t, "bob", "bob-secret")
		adm := ss.admin(t)
		createTopics(t, adm, "open", "closed")
		createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("closed").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
		bob := ss.userClient(t, "bob")
		err := produceErr(t, bob, "open")
		if open && err != nil {
			t.Fatalf("open: bob produce to a topic without ACLs: %v", err)
		}
		if !open && !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("default: bob produce to a topic without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		if err := produceErr(t, bob, "closed"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("open=%v: bob produce to alice's topic: %v, want TOPIC_AUTHORIZATION_FAILED", open, err)
		}
		if err := produceErr(t, ss.userClient(t, "alice"), "closed"); err != nil {
			t.Fatalf("open=%v: alice produce to closed: %v", open, err)
		}
	}
}

// TestACLsConfigErrors: an unknown authorizer.class.name, a bad super.users
// entry and a bad allow.everyone.if.no.acl.found are errors naming the key.
func TestACLsConfigErrors(t *testing.T) {
	for key, val := range map[string]string{
		"authorizer.class.name":          "com.example.MyAuthorizer",
		"super.users":                    "alice",
		"allow.everyone.if.no.acl.found": "yes",
	} {
		_, err := config.FromProperties(aclProps(map[string]string{key: val}))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: %v, want an error naming %s", key, val, err, key)
		}
	}
}

// TestACLsAdminAndGroupAPIs: the per-entry and whole-request denials of
// the other APIs, each sent straight to the broker by a principal with
// READ on topic orders and group g1 only: the denied entries carry
// Kafka's error, the allowed ones are served.
func TestACLsAdminAndGroupAPIs(t *testing.T) {
	ss := startSecureServer(t, nil, aclProps(nil))
	ss.addUser(t, "alice", "alice-secret")
	adm := ss.admin(t)
	createTopics(t, adm, "orders", "secret")
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Groups("g1").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	alice := ss.userClient(t, "alice")
	if err := alice.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	br := alice.SeedBrokers()[0]
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := br.Request(testCtx(t), req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	want := func(what string, got, want int16) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	topicDenied, groupDenied, clusterDenied := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code

	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}
	want("CreateTopics without CREATE", send(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, topicDenied)

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: ""}}
	dcr := send(dc).(*kmsg.DescribeConfigsResponse)
	if len(dcr.Resources) != 2 {
		t.Fatalf("DescribeConfigs: %d resources answered, want 2", len(dcr.Resources))
	}
	for _, r := range dcr.Resources {
		w := topicDenied
		if r.ResourceType == kmsg.ConfigResourceTypeBroker {
			w = clusterDenied
		}
		want("DescribeConfigs "+r.ResourceType.String(), r.ErrorCode, w)
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}}}
	want("IncrementalAlterConfigs without ALTER_CONFIGS", send(ia).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, topicDenied)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 3}}
	cp.TimeoutMillis = 5000
	want("CreatePartitions without ALTER", send(cp).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode, topicDenied)

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	dr.TimeoutMillis = 5000
	want("DeleteRecords without DELETE", send(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, topicDenied)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	for _, name := range []string{"orders", "secret"} {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
	}
	lor := send(lo).(*kmsg.ListOffsetsResponse)
	codes := map[string]int16{}
	for _, rt := range lor.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	want("ListOffsets orders (DESCRIBE implied by READ)", codes["orders"], 0)
	want("ListOffsets secret", codes["secret"], topicDenied)

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g1", -1
	for _, name := range []string{"orders", "secret"} {
		oc.Topics = append(oc.Topics, kmsg.OffsetCommitRequestTopic{Topic: name, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}})
	}
	codes = map[string]int16{}
	for _, rt := range send(oc).(*kmsg.OffsetCommitResponse).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	want("OffsetCommit g1 orders", codes["orders"], 0)
	want("OffsetCommit g1 secret (no READ on the topic)", codes["secret"], topicDenied)
	oc.Group = "g2"
	want("OffsetCommit g2", send(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, groupDenied)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g1"}, {Group: "g2"}}
	codes = map[string]int16{}
	for _, g := range send(of).(*kmsg.OffsetFetchResponse).Groups {
		codes[g.Group] = g.ErrorCode
	}
	want("OffsetFetch g1", codes["g1"], 0)
	want("OffsetFetch g2", codes["g2"], groupDenied)

	// The super user commits g1's offset of secret; alice fetching g1's
	// offsets does not see it (all topics) or is denied it (named).
	ocAdmin := kmsg.NewPtrOffsetCommitRequest()
	ocAdmin.Group, ocAdmin.Generation = "g1", -1
	ocAdmin.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	if resp, err := ocAdmin.RequestWith(testCtx(t), newClient(t, ss.addrs["PLAINTEXT"])); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("super user commits g1 secret: %v %+v", err, resp)
	}
	for _, v := range []int16{8} { // franz-go sends the highest version both sides serve
		all := kmsg.NewPtrOffsetFetchRequest()
		all.Version = v
		all.Group, all.Groups = "g1", []kmsg.OffsetFetchRequestGroup{{Group: "g1"}}
		resp, err := br.Request(testCtx(t), all)
		if err != nil {
			t.Fatal(err)
		}
		topics := resp.(*kmsg.OffsetFetchResponse).Topics
		if v == 8 {
			topics = nil
			for _, gt := range resp.(*kmsg.OffsetFetchResponse).Groups[0].Topics {
				topics = append(topics, kmsg.OffsetFetchResponseTopic{Topic: gt.Topic})
			}
		}
		var names []string
		for _, tp := range topics {
			names = append(names, tp.Topic)
		}
		if !slices.Contains(names, "orders") || slices.Contains(names, "secret") {
			t.Errorf("OffsetFetch v%d of all g1's topics lists %v, want orders and not secret", v, names)
		}
		named := kmsg.NewPtrOffsetFetchRequest()
		named.Version = v
		named.Group, named.Topics = "g1", []kmsg.OffsetFetchRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		named.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g1", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "secret", Partitions: []int32{0}}}}}
		resp, err = br.Request(testCtx(t), named)
		if err != nil {
			t.Fatal(err)
		}
		code := int16(-99)
		if fr := resp.(*kmsg.OffsetFetchResponse); v < 8 && len(fr.Topics) == 1 {
			code = fr.Topics[0].Partitions[0].ErrorCode
		} else if v == 8 && len(fr.Groups) == 1 && len(fr.Groups[0].Topics) == 1 {
			code = fr.Groups[0].Topics[0].Partitions[0].ErrorCode
		}
		want(fmt.Sprintf("OffsetFetch v%d of g1 secret by name", v), code, topicDenied)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g1", "g2"}
	codes = map[string]int16{}
	for _, g := range send(dg).(*kmsg.DescribeGroupsResponse).Groups {
		codes[g.Group] = g.ErrorCode
	}
	want("DescribeGroups g1", codes["g1"], 0)
	want("DescribeGroups g2", codes["g2"], groupDenied)

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g1"}
	want("DeleteGroups g1 without DELETE", send(del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, groupDenied)

	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.TransactionalID, ipid.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
	want("InitProducerId tx", send(ipid).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed.Code)
	ipid.TransactionalID = nil
	want("InitProducerId idempotent without WRITE anywhere", send(ipid).(*kmsg.InitProducerIDResponse).ErrorCode, clusterDenied)

	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	want("DescribeAcls without DESCRIBE on the cluster", send(da).(*kmsg.DescribeACLsResponse).ErrorCode, clusterDenied)
	want("DescribeUserScramCredentials", send(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode, clusterDenied)
	el := kmsg.NewPtrElectLeadersRequest()
	el.TimeoutMillis = 1000
	want("ElectLeaders", send(el).(*kmsg.ElectLeadersResponse).ErrorCode, clusterDenied)
}

// TestACLsClusterNeedsOwnInterBrokerListener: in cluster mode the
// authorizer trusts the inter-broker listener, so a config where clients
// could share it (one listener, or no inter.broker.listener.name) is
// refused, naming the keys.
func TestACLsClusterNeedsOwnInterBrokerListener(t *testing.T) {
	for name, c := range map[string]struct {
		props map[string]string
		ok    bool
	}{
		"one listener": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"}, false},
		"no inter.broker.listener.name": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			"sasl.enabled.mechanisms": "PLAIN"}, false},
		"own listener": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			"sasl.enabled.mechanisms": "PLAIN", "inter.broker.listener.name": "PLAINTEXT"}, true},
	} {
		c.props["authorizer.class.name"] = "sluice.acl.Authorizer"
		cfg, err := config.FromProperties(c.props)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err = checkTrustedListener(cfg)
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "inter.broker.listener.name")) {
			t.Errorf("%s: %v", name, err)
		}
	}
	cfg, _ := config.FromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"})
	if err := checkTrustedListener(cfg); err != nil {
		t.Errorf("authorizer off, one listener: %v", err)
	}
}
