"""Confluent's own Python client (confluent-kafka: librdkafka and the
schema_registry package's AvroSerializer / AvroDeserializer) against sluice.

  produce: registers the PageView schema through the serializer
           (auto.register.schemas) and sends --count framed records to --topic.
  --user-info USER:PASSWORD and --ca FILE authenticate to a registry with
           basic auth over https, as Confluent's clients are configured.
  consume: reads --count records of --topic from the start and decodes each
           with an AvroDeserializer that fetches the writer schema by id;
           prints one JSON object per record.
"""
import argparse
import json
import sys

from confluent_kafka import Consumer, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

SCHEMA = json.dumps({
    "type": "record", "name": "PageView", "namespace": "sluice.test",
    "fields": [
        {"name": "url", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
})


def produce(args, registry):
    serializer = AvroSerializer(registry, SCHEMA, conf={"auto.register.schemas": True})
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all"})
    for i in range(args.count):
        value = {"url": f"/page/{i}", "ts": 1700000000000 + i, "referrer": None if i % 2 else f"/from/{i}"}
        producer.produce(args.topic, value=serializer(value, SerializationContext(args.topic, MessageField.VALUE)))
    if producer.flush(30) != 0:
        sys.exit("produce: records left unsent after 30 s")


def consume(args, registry):
    deserializer = AvroDeserializer(registry)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "sluice-registry-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    seen = 0
    for _ in range(600):
        if seen >= args.count:
            break
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            sys.exit(f"consume: {msg.error()}")
        value = deserializer(msg.value(), SerializationContext(args.topic, MessageField.VALUE))
        print(json.dumps(value, sort_keys=True), flush=True)
        seen += 1
    consumer.close()
    if seen < args.count:
        sys.exit(f"consume: {seen} of {args.count} records in 60 s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["produce", "consume"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--registry", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--user-info", help="USER:PASSWORD for basic auth (basic.auth.user.info)")
    p.add_argument("--ca", help="PEM CA file for an https registry (ssl.ca.location)")
    args = p.parse_args()
    conf = {"url": args.registry}
    if args.user_info:
        conf["basic.auth.user.info"] = args.user_info
    if args.ca:
        conf["ssl.ca.location"] = args.ca
    registry = SchemaRegistryClient(conf)
    (produce if args.mode == "produce" else consume)(args, registry)


if __name__ == "__main__":
    main()
