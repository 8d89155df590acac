# ZooKeeper for the distributed scheduler tests (scheduler/, testdata/harness/zk):
# Debian's zookeeper package, whose server the harness starts with java.
# Idempotent: apt runs only when zookeeper.jar, slf4j-simple or java is missing.

.PHONY: deps-zk

deps: deps-zk

deps-zk:
	@missing=; \
	[ -f /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	[ -f /usr/share/java/slf4j-simple.jar ] || missing="$$missing libslf4j-java"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	if [ -n "$$missing" ]; then \
	  echo "deps-zk: installing$$missing"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
