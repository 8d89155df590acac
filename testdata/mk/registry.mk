# Schema registry (broker/schemaregistry): its tests drive the registry with
# Confluent's own Python client (confluent-kafka: librdkafka, the
# schema_registry package, AvroSerializer / AvroDeserializer over fastavro).

deps: deps-registry

deps-registry:
	@if ! python3 -c 'import confluent_kafka.schema_registry.avro' >/dev/null 2>&1; then \
	  echo "deps-registry: installing confluent-kafka (Confluent's Python client and Avro serializer)"; \
	  python3 -m pip install -q 'confluent-kafka[avro,schemaregistry]==2.16.1'; \
	fi
