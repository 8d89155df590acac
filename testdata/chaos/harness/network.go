package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNetwork wraps a failure of ip, nft or the cgroup file system.
var ErrNetwork = errors.New("harness: network")

// cgroupFS is where nft resolves cgroupv2 paths from.
const cgroupFS = "/sys/fs/cgroup"

// Network is one run's share of the loopback network: a block of addresses
// 127.0.S.2, 127.0.S.3, ... (S is the first block no other run holds, so
// concurrent test binaries never partition each other's nodes), a cgroup per
// node and an nft table named for the run. See the package doc for the rules.
type Network struct {
	// Table is the nft table's name (family ip).
	Table string
	// Block is S of the 127.0.S.N addresses this run owns.
	Block int

	lock     *os.File // flock on the block, held until Close
	cgRoot   string   // absolute cgroup directory of the run
	cgNFT    string   // the same, relative to cgroupFS (how nft names it)
	cgLevel  int      // the level of a node's cgroup below the cgroup2 root
	events   *Events
	mu       sync.Mutex        // guards the fields below
	nodes    map[string]string // address by node name
	next     int               // next host number to hand out
	rules    []string          // fault rules in force, for the report
	isClosed bool
}

// NewNetwork claims an address block, makes the run's cgroup and nft table.
// The caller must Close it (a Run does so at test cleanup).
func NewNetwork(name string, events *Events) (*Network, error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("%w: nft not found on PATH: run `make deps-chaos` (Debian's nftables)", ErrNetwork)
	}
	lock, block, err := claimBlock()
	if err != nil {
		return nil, err
	}
	mount, err := cgroup2Mount()
	if err != nil {
		lock.Close()
		return nil, err
	}
	n := &Network{Table: name, Block: block, lock: lock, events: events, nodes: map[string]string{}, next: 2}
	n.cgRoot = filepath.Join(mount, name)
	rel, err := filepath.Rel(cgroupFS, n.cgRoot)
	if err != nil || strings.HasPrefix(rel, "..") {
		lock.Close()
		return nil, fmt.Errorf("%w: cgroup2 is mounted at %s, outside %s where nft looks", ErrNetwork, mount, cgroupFS)
	}
	n.cgNFT = rel
	n.cgLevel = 2 // <run>/<node> below the cgroup2 root
	if err := os.Mkdir(n.cgRoot, 0o755); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: make cgroup %s: %v", ErrNetwork, n.cgRoot, err)
	}
	table := fmt.Sprintf(`table ip %s {
	chain c_mark { type filter hook output priority mangle; }
	chain c_source { type nat hook postrouting priority srcnat; }
	chain c_reply { type filter hook output priority -150; }
	chain c_orig { type filter hook postrouting priority 200; }
}
`, name)
	if err := nft(table); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// claimBlock takes an exclusive lock on the first free address block.
func claimBlock() (*os.File, int, error) {
	for s := 0; s < 256; s++ {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("sluice-chaos-net-%d.lock", s)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrNetwork, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return f, s, nil
		}
		f.Close()
	}
	return nil, 0, fmt.Errorf("%w: all 256 address blocks are held by other runs", ErrNetwork)
}

// cgroup2Mount finds the cgroup2 mount point (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a hybrid system).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNetwork, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[2] == "cgroup2" {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%w: no cgroup2 file system is mounted", ErrNetwork)
}

// nft runs `nft -f -` with script on stdin.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: nft: %v: %s\nscript:\n%s", ErrNetwork, err, strings.TrimSpace(string(out)), script)
	}
	return nil
}

// EnsureLoopback adds each address to lo unless it is there already.
func EnsureLoopback(addrs ...string) error {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: ip addr show: %v: %s", ErrNetwork, err, out)
	}
	for _, a := range addrs {
		if strings.Contains(string(out), "inet "+a+"/") {
			continue
		}
		if out, err := exec.Command("ip", "addr", "add", a+"/8", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") {
			return fmt.Errorf("%w: ip addr add %s/8 dev lo: %v: %s", ErrNetwork, a, err, out)
		}
	}
	return nil
}

// ClientAddr is the address the test process's own clients use.
const ClientAddr = "127.0.0.1"

// attach gives a node the next address of the block and its own cgroup,
// whose sockets' traffic is translated to that address.
func (n *Network) attach(name string) (addr, cgroup string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, dup := n.nodes[name]; dup {
		return "", "", fmt.Errorf("%w: two nodes named %q", ErrNetwork, name)
	}
	if n.next > 254 {
		return "", "", fmt.Errorf("%w: more than 253 nodes", ErrNetwork)
	}
	host := n.next
	addr = fmt.Sprintf("127.0.%d.%d", n.Block, host)
	if err := EnsureLoopback(addr); err != nil {
		return "", "", err
	}
	cgroup = filepath.Join(n.cgRoot, name)
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		return "", "", fmt.Errorf("%w: make cgroup %s: %v", ErrNetwork, cgroup, err)
	}
	mark := 0x5c000000 | n.Block<<8 | host
	script := fmt.Sprintf("add rule ip %[1]s c_mark socket cgroupv2 level %[2]d %[3]q meta mark set %#[4]x\n"+
		"add rule ip %[1]s c_source meta mark %#[4]x ip daddr 127.0.0.0/8 snat to %[5]s\n",
		n.Table, n.cgLevel, filepath.Join(n.cgNFT, name), mark, addr)
	if err := nft(script); err != nil {
		os.Remove(cgroup)
		return "", "", err
	}
	n.nodes[name] = addr
	n.next++
	return addr, cgroup, nil
}

// Cut drops every packet from address a to address b (one way). TCP being
// what it is, a one-way cut stalls connections either side opens; it differs
// from a two-way cut in what each side sees time out first.
func (n *Network) Cut(a, b string) error {
	return n.addFault(fmt.Sprintf("%s -> %s", a, b),
		fmt.Sprintf("add rule ip %[1]s c_orig ct direction original ip saddr %[2]s ip daddr %[3]s drop\n"+
			"add rule ip %[1]s c_reply ct direction reply ip saddr %[2]s ip daddr %[3]s drop\n", n.Table, a, b))
}

// Partition cuts every address of side from every address of other, both ways.
func (n *Network) Partition(side, other []string) error {
	var b strings.Builder
	for _, x := range side {
		for _, y := range other {
			for _, p := range [][2]string{{x, y}, {y, x}} {
				fmt.Fprintf(&b, "add rule ip %[1]s c_orig ct direction original ip saddr %[2]s ip daddr %[3]s drop\n"+
					"add rule ip %[1]s c_reply ct direction reply ip saddr %[2]s ip daddr %[3]s drop\n", n.Table, p[0], p[1])
			}
		}
	}
	return n.addFault(fmt.Sprintf("%v <-/-> %v", side, other), b.String())
}

// Lossy drops percent of the packets to and from addr at random.
func (n *Network) Lossy(addr string, percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w: loss %d%% is not a percentage", ErrNetwork, percent)
	}
	chance := fmt.Sprintf("numgen random mod 100 < %d ", percent) // nft takes 0..99 here
	if percent == 100 {
		chance = ""
	}
	var b strings.Builder
	for _, dir := range []string{"saddr", "daddr"} {
		fmt.Fprintf(&b, "add rule ip %[1]s c_orig ct direction original ip %[2]s %[3]s %[4]sdrop\n"+
			"add rule ip %[1]s c_reply ct direction reply ip %[2]s %[3]s %[4]sdrop\n", n.Table, dir, addr, chance)
	}
	return n.addFault(fmt.Sprintf("%s loses %d%%", addr, percent), b.String())
}

func (n *Network) addFault(what, script string) error {
	if err := nft(script); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = append(n.rules, what)
	n.mu.Unlock()
	return nil
}

// Faults lists the cuts and losses in force.
func (n *Network) Faults() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.rules...)
}

// Heal removes every cut and loss (the address translation stays).
func (n *Network) Heal() error {
	if err := nft(fmt.Sprintf("flush chain ip %[1]s c_orig\nflush chain ip %[1]s c_reply\n", n.Table)); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = nil
	n.mu.Unlock()
	return nil
}

// Close deletes the nft table, kills what is left in the run's cgroups and
// removes them, and releases the address block. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.isClosed {
		n.mu.Unlock()
		return nil
	}
	n.isClosed = true
	n.mu.Unlock()
	var errs []error
	if err := nft(fmt.Sprintf("delete table ip %s\n", n.Table)); err != nil && TableExists(n.Table) {
		errs = append(errs, err)
	}
	if n.cgRoot != "" {
		errs = append(errs, removeCgroups(n.cgRoot))
	}
	if n.lock != nil {
		n.lock.Close()
	}
	return errors.Join(errs...)
}

// TableExists reports whether an ip nft table of that name exists.
func TableExists(name string) bool {
	return exec.Command("nft", "list", "table", "ip", name).Run() == nil
}

// removeCgroups kills every process left below root and removes the cgroups.
func removeCgroups(root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("%w: %v", ErrNetwork, err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		for try := 0; try < 50; try++ {
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			pids := strings.Fields(string(b))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				var pid int
				fmt.Sscan(p, &pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond) // the kernel reaps them; nothing to wait on
		}
		if err := os.Remove(dir); err != nil {
			errs = append(errs, fmt.Errorf("%w: remove cgroup %s: %v", ErrNetwork, dir, err))
		}
	}
	if err := os.Remove(root); err != nil {
		errs = append(errs, fmt.Errorf("%w: remove cgroup %s: %v", ErrNetwork, root, err))
	}
	return errors.Join(errs...)
}
