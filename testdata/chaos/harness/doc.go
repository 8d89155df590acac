// Package harness is the process and fault layer of the chaos tests under
// testdata/chaos: named processes each on its own loopback address, nemeses
// that kill, pause, partition, slow, starve or skew them on a schedule, and
// the report every run leaves behind. Workloads and the checker over their
// history live in testdata/chaos/workload and internal/history; this package
// knows nothing of Kafka semantics.
//
//	scenario test ──► Run (seed, CHAOS_TIME, report dir)
//	     │               ├─ Network: one nft table per run, one cgroup per node
//	     │               ├─ Node "broker" 127.0.0.2 ─► sluice broker     (log: logs/broker.log)
//	     │               ├─ Node "zk"     127.0.0.3 ─► java ZooKeeperServerMain
//	     │               └─ Node "w1"     127.0.0.4 ─► sluice worker ...
//	     ├─ workload (records a history)      ◄── clients at 127.0.0.1
//	     └─ Schedule ─► Nemesis.Start / Heal ─► Events (faults with times) ─► Report
//
// # Addresses
//
// Every node listens on its own address 127.0.S.N (added to lo by
// EnsureLoopback, idempotently; the addresses are left on lo, where any
// process may use them). Listening there is not enough for a partition: the
// kernel gives an outgoing loopback connection the source 127.0.0.1 whatever
// the process listens on. So each node runs in its own cgroup (v2, made by
// the Network and removed at its Close), and the run's nft table marks the
// packets of that cgroup's sockets (output hook) and SNATs them to the
// node's address (postrouting). A node's traffic therefore carries its
// address in both directions, and a partition is a plain address pair:
//
//	chain c_reply  (output, priority -150)     ct direction reply    ip saddr A ip daddr B drop
//	chain c_orig   (postrouting, priority 200) ct direction original ip saddr A ip daddr B drop
//
// (a reply's destination is translated back at the output NAT hook, hence
// the reply rule sits before it; an original packet's source after the
// postrouting NAT, hence the original rule sits after it). The test's own
// clients run in the test process at 127.0.0.1 and are not translated.
//
// # The network API (for cluster scenarios)
//
// A Run's Net hands every node made with Run.Reserve (or Run.Broker) its
// own address 127.0.S.N: S is the run's block (Network.Block, one per
// concurrent run), N = 2, 3, … up to 254, in the order nodes are made;
// Node.Addr holds it, and the test's own clients are ClientAddr
// (127.0.0.1, never translated, so never cut unless named). Faults are
// plain address pairs and stack until healed:
//
//	r.Net.Cut(a.Addr, b.Addr)                       // a -> b dropped, b -> a untouched (one way)
//	r.Net.Partition([]string{a.Addr}, []string{b.Addr, c.Addr}) // both ways, every pair across the sides
//	r.Net.Lossy(a.Addr, 30)                          // 30% of a's packets, either direction, dropped
//	r.Net.Faults()                                   // what is in force, for the report
//	r.Net.Heal()                                     // every cut and loss removed at once
//
// Any number of nodes, any pairs: a cut names one ordered pair and nothing
// else (TestPartitionsArePairwise: with c -> s1 cut, c -> s2 and d -> s1
// still connect). Heal removes all faults; to heal one pair of several,
// Heal and cut the rest again. As nemeses on a schedule: Isolate (one of
// Nodes against Peers, OneWay for outgoing only), Lose, and Aimed to hit a
// target found when the fault starts (the controller, a partition's
// leader). A node's address is fixed for the run, across restarts, so a
// broker's advertised listener stays valid.
//
// # Deviations from the fault list
//
//   - Slow and lossy links: this kernel has no netem (or prio) qdisc, so `tc
//     netem` is not available. A lossy link is an nft rule `numgen random mod
//     100 < N drop` scoped to the node addresses; a slow link is Proxy, a
//     delaying TCP relay the slowed node is pointed at.
//   - Clock jumps: libfaketime works by interposing libc's time functions
//     (LD_PRELOAD). A Go binary reads the clock through the vDSO without libc,
//     so FAKETIME does not move a sluice process's clock (FaketimeEnv exists for
//     the JVM, and TestFaketimeDoesNotMoveGo checks the claim). Clock jumps for
//     sluice code are made in-process, through the injected clock of the code
//     under test (scheduler.ManualClock and the like).
//   - Disk full: Disk mounts a small tmpfs on a node's data directory and fills
//     it with a ballast file (Fill) and frees it (Free).
//   - Slow disk: no device mapper (dm-delay) and no cgroup v2 io controller
//     here, so Run.LoopDisk mounts an ext4 on a loop device and Throttle
//     limits the writes a node's process issues to it (cgroup v1 blkio
//     write_iops_device): fsync and write-through I/O wait for the limit,
//     what the page cache absorbs is slowed only when written back. The
//     SlowDisk nemesis throttles and lifts it.
//
// # Clean up
//
// Everything a run makes is undone at test cleanup, also on failure: processes
// (SIGKILL to their process group), the nft table (named uniquely per run),
// the cgroups, the tmpfs mounts, the proxies.
package harness
