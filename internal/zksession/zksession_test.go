package zksession

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseConnect(t *testing.T) {
	for in, want := range map[string][2]string{
		"127.0.0.1:2181":       {"127.0.0.1:2181", "/sluice"},
		"a:1,b:2/prod/sluice/": {"a:1,b:2", "/prod/sluice"},
		"zk:2181/x":            {"zk:2181", "/x"},
	} {
		servers, chroot, err := ParseConnect(in)
		if err != nil || !slices.Equal(servers, strings.Split(want[0], ",")) || chroot != want[1] {
			t.Errorf("ParseConnect(%q) = %v %q %v", in, servers, chroot, err)
		}
	}
	for _, bad := range []string{"", "/sluice", "zk:2181/"} {
		if _, _, err := ParseConnect(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParseConnect(%q): %v, want ErrConfig", bad, err)
		}
	}
}
