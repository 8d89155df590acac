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

# The stamp holds the pom's checksum: a changed pom refetches, a fresh clone
# with an intact cache does not. The jars land in a temporary directory that is
# renamed into place, so a running test never sees a half-filled lib/.
deps-kafka-jars: deps-kafka-kcat
	@sum=$$(sha256sum testdata/kafka/pom.xml | cut -d' ' -f1); \
	if [ "$$(cat $(KAFKA_STAMP) 2>/dev/null)" != "$$sum" ]; then \
	  echo "deps-kafka: fetching the Apache Kafka jars into $(KAFKA_LIB)"; \
	  rm -rf $(KAFKA_LIB).tmp && \
	  mvn -q -B -Dstyle.color=never -f testdata/kafka/pom.xml dependency:copy-dependencies \
	    -DoutputDirectory=$(CURDIR)/$(KAFKA_LIB).tmp -DincludeScope=runtime && \
	  echo "$$sum" > $(KAFKA_LIB).tmp/.complete && \
	  rm -rf $(KAFKA_LIB).old && { [ ! -d $(KAFKA_LIB) ] || mv $(KAFKA_LIB) $(KAFKA_LIB).old; } && \
	  mv $(KAFKA_LIB).tmp $(KAFKA_LIB) && rm -rf $(KAFKA_LIB).old; \
	fi
