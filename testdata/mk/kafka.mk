# Kafka interoperability: kcat (Debian) and the Apache Kafka 4.1 jars (Maven)
# for broker/interop and testdata/bench/vs-kafka.sh. Idempotent: each step
# checks first and is a no-op when already done.

KAFKA_LIB   := testdata/.cache/kafka/lib
KAFKA_STAMP := $(KAFKA_LIB)/.complete

.PHONY: deps-kafka deps-kafka-kcat deps-kafka-jars

deps: deps-kafka

deps-kafka: deps-kafka-kcat deps-kafka-jars

# One apt-get update, only when something is missing.
deps-kafka-kcat:
	@missing=; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v mvn  >/dev/null 2>&1 || missing="$$missing maven"; \
	if [ -n "$$missing" ]; then \
	  echo "deps-kafka: installing$$missing"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(KAFKA_STAMP): testdata/kafka/pom.xml | deps-kafka-kcat
	@echo "deps-kafka: fetching the Apache Kafka jars into $(KAFKA_LIB)"
	@rm -rf $(KAFKA_LIB)
	mvn -q -B -f testdata/kafka/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(CURDIR)/$(KAFKA_LIB) -DincludeScope=runtime
	@touch $@

deps-kafka-jars: $(KAFKA_STAMP)
