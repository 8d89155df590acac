# MIT Kerberos (a real KDC for the Kerberized MiniDFSCluster tests:
# testdata/harness/kdc runs krb5kdc, kdb5_util and kadmin.local from it, and
# the tests use kinit/klist for the ticket cache). Idempotent.

.PHONY: deps-kerberos

deps: deps-kerberos

deps-kerberos:
	@if ! command -v krb5kdc >/dev/null 2>&1 || ! command -v kdb5_util >/dev/null 2>&1 || \
	    ! command -v kadmin.local >/dev/null 2>&1 || ! command -v kinit >/dev/null 2>&1; then \
	  echo "deps-kerberos: installing MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq krb5-kdc krb5-admin-server krb5-user >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq krb5-kdc krb5-admin-server krb5-user >/dev/null; }; \
	fi
