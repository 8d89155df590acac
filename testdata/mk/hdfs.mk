# HDFS (MiniDFSCluster) and the Python readers (pyarrow, fastavro) used by the
# writers' tests. Idempotent: each step checks before it installs.

HDFS_CACHE := testdata/.cache/hdfs
HDFS_CP    := $(HDFS_CACHE)/classpath.txt
HDFS_CLASS := $(HDFS_CACHE)/classes/MiniHDFS.class
M2_REPO    := $(CURDIR)/testdata/.cache/m2

.PHONY: deps-hdfs deps-python deps-jdk

deps: deps-hdfs deps-python

deps-jdk:
	@if ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then \
	  echo "deps-jdk: installing a JDK and Maven"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless maven >/dev/null; \
	fi

$(HDFS_CP): testdata/hdfs/pom.xml
	@mkdir -p $(HDFS_CACHE)
	@echo "deps-hdfs: resolving hadoop-client-minicluster 3.4.1 with Maven"
	mvn -B -q -f testdata/hdfs/pom.xml -Dmaven.repo.local=$(M2_REPO) \
	  dependency:build-classpath -Dmdep.outputFile=$(CURDIR)/$(HDFS_CP).tmp
	@mv $(HDFS_CP).tmp $(HDFS_CP)

$(HDFS_CLASS): testdata/hdfs/MiniHDFS.java $(HDFS_CP)
	@mkdir -p $(HDFS_CACHE)/classes
	javac -nowarn -cp "$$(cat $(HDFS_CP))" -d $(HDFS_CACHE)/classes testdata/hdfs/MiniHDFS.java

# The classpath names jars by absolute path: when one is gone (the clone or
# its cache moved, a worktree sharing the cache removed) it is resolved again.
deps-hdfs: deps-jdk
	@if [ -f $(HDFS_CP) ] && tr ':' '\n' < $(HDFS_CP) | while read -r jar; do [ -e "$$jar" ] || exit 1; done; then :; \
	else rm -f $(HDFS_CP); fi
	@$(MAKE) --no-print-directory $(HDFS_CLASS)

deps-python:
	@if ! python3 -c 'import pyarrow, fastavro, cramjam, backports.zstd' >/dev/null 2>&1; then \
	  echo "deps-python: installing pyarrow, fastavro and its codecs"; \
	  python3 -m pip install -q pyarrow fastavro cramjam backports.zstd; \
	fi
