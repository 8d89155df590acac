# Schema registry (broker/schemaregistry) and the loader's typed decoders
# (jobs): their tests drive the registry with Confluent's own Python client
# (confluent-kafka: librdkafka, the schema_registry package, the Avro,
# Protobuf and JSON Schema serializers) and compile .proto files for it
# with grpcio-tools.

deps: deps-registry

deps-registry:
	@if ! python3 -c 'import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema, grpc_tools.protoc' >/dev/null 2>&1; then \
	  echo "deps-registry: installing confluent-kafka (Confluent's Python client and serializers) and grpcio-tools"; \
	  python3 -m pip install -q 'confluent-kafka[avro,protobuf,json,schemaregistry]==2.16.1' 'grpcio-tools==1.85.1'; \
	fi
