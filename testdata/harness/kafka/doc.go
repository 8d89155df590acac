// Package kafka is the test harness for Kafka-protocol interoperability: it
// starts a real single-node KRaft Apache Kafka broker from the jars that
// `make deps-kafka` puts under testdata/.cache/kafka/lib, runs kcat and the
// Java console producer / consumer, and builds and starts the sluice broker
// binary (a broker inside the test process is testdata/harness/sluice's
// StartBroker).
//
//	test ──► SharedKafka(t) ───► java kafka.Kafka (KRaft, loopback ports, temp dir)
//	     ──► StartSluice(t)  ───► go build ./cmd/sluice (once) ─► sluice broker --listen 127.0.0.1:0
//	     ──► Kcat(t, ...)    ───► /usr/bin/kcat
//	     ──► Java(t, ...)    ───► java -cp <kafka jars> org.apache.kafka.tools.ConsoleProducer ...
//
// A missing dependency fails the test and names the make target that
// installs it. Processes started here die with the test binary (Linux
// parent-death signal) and are stopped at test cleanup; shared ones are
// stopped by Main after m.Run.
package kafka
