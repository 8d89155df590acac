package interop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestClusterACLsSeenByEveryBroker: in a 3-broker cluster with the
// authorizer on (clients on a SASL_PLAINTEXT listener, replication on the
// PLAINTEXT inter-broker listener, trusted), an ACL created through broker
// 1 is enforced by broker 2, and its removal through broker 3 too; the
// topic's replication keeps working throughout (acks=all produces).
func TestClusterACLsSeenByEveryBroker(t *testing.T) {
	c := startBrokerCluster(t, 3,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sasl := map[int32]string{}
	for _, id := range c.ids() {
		eventually(t, 20*time.Second, fmt.Sprintf("broker %d's SASL_PLAINTEXT listener", id), func() error {
			for _, m := range listenerLine.FindAllStringSubmatch(c.brokers[id].Output(), -1) {
				if m[1] == "SASL_PLAINTEXT" {
					sasl[id] = m[2]
					return nil
				}
			}
			return errors.New("not printed")
		})
	}
	// Users through the trusted inter-broker listener (PLAINTEXT).
	res, err := kadm.NewClient(c.client()).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "admin", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "admin-pw"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("create users: %v %v", err, res.Error())
	}
	user := func(id int32, name string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sasl[id]), kgo.SASL(scram.Auth{User: name, Pass: name + "-pw"}.AsSha512Mechanism()),
			kgo.RetryTimeout(3*time.Second), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin1, admin3 := kadm.NewClient(user(1, "admin")), kadm.NewClient(user(3, "admin"))
	if r, err := admin1.CreateTopic(ctx, 3, 3, nil, "orders"); err != nil || r.Err != nil {
		t.Fatalf("create orders: %v %v", err, r.Err)
	}
	c.waitLeaders("orders", 3)
	alice2 := user(2, "alice")
	// describe asks broker 2 alone (its node id, learned from the seed)
	// whether alice may see orders.
	describe := func() error {
		if err := alice2.Ping(ctx); err != nil {
			return err
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, alice2.Broker(2))
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err := describe(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice on broker 2 before any ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	b := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if r, err := admin1.CreateACLs(ctx, b); err != nil || r[0].Err != nil || r[1].Err != nil {
		t.Fatalf("create ACLs through broker 1: %v %+v", err, r)
	}
	eventually(t, 10*time.Second, "broker 2 enforcing the ACL created through broker 1", describe)
	if err := alice2.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice produce (acks=all, replicated) with the ACL: %v", err)
	}
	del := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral)
	if r, err := admin3.DeleteACLs(ctx, del); err != nil || len(r) == 0 || r[0].Err != nil || len(r[0].Deleted) != 2 {
		t.Fatalf("delete ACLs through broker 3: %v %+v", err, r)
	}
	eventually(t, 10*time.Second, "broker 2 enforcing the removal through broker 3", func() error {
		if err := describe(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("alice's Metadata on broker 2: %v", err)
		}
		return nil
	})
}
