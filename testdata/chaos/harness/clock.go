package harness

// FaketimeLib is Debian's libfaketime (package faketime).
const FaketimeLib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// FaketimeEnv is the environment that runs a dynamically linked program with
// its clock set by spec (libfaketime's FAKETIME syntax: "@2001-02-03
// 04:05:06" to start there, "+2h" for an offset). It moves the clock of
// programs that read it through libc — the JVM of ZooKeeper, date(1) — and
// not of Go binaries (see the package doc).
func FaketimeEnv(spec string) []string {
	return []string{"LD_PRELOAD=" + FaketimeLib, "FAKETIME=" + spec, "FAKETIME_DONT_RESET=1"}
}
