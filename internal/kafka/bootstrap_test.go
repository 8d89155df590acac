package kafka

import (
	"errors"
	"testing"
)

func TestCheckAddress(t *testing.T) {
	for _, c := range []struct {
		addr, err string // err "" = accepted
	}{
		{"127.0.0.1:9092", ""},
		{"[::1]:9092", ""},
		{"kafka-1:65535", ""},
		{"h:1", ""},
		{"localhost", `"localhost" is not HOST:PORT`},
		{":9092", `":9092" is not HOST:PORT`},
		{"h:", `"h:" is not HOST:PORT`},
		{"h:9092x", `"h:9092x" is not HOST:PORT`},
		{"h:-1", `"h:-1" is not HOST:PORT`},
		{"h:0", `"h:0": the port must be 1 to 65535`},
		{"h:65536", `"h:65536": the port must be 1 to 65535`},
		{"h:99999999999999999999999", `"h:99999999999999999999999": the port must be 1 to 65535`},
	} {
		err := CheckAddress(c.addr)
		if c.err == "" {
			if err != nil {
				t.Errorf("CheckAddress(%q) = %v, want nil", c.addr, err)
			}
			continue
		}
		var ae *AddressError
		if err == nil || err.Error() != c.err || !errors.Is(err, ErrBadInput) || !errors.As(err, &ae) || ae.Address != c.addr {
			t.Errorf("CheckAddress(%q) = %v, want %s (an *AddressError wrapping ErrBadInput)", c.addr, err, c.err)
		}
		if _, err := SplitBootstrap("ok:1," + c.addr); !errors.Is(err, ErrBadInput) {
			t.Errorf("SplitBootstrap(ok:1,%s) = %v, want ErrBadInput", c.addr, err)
		}
	}
}
