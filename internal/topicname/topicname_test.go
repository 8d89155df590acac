package topicname

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"a.b_c-D9", true},
		{"__consumer_offsets", true},
		{"...", true},
		{"-", true},
		{strings.Repeat("x", MaxLength), true},
		{strings.Repeat("x", MaxLength+1), false},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a\\b", false},
		{"a+b", false},
		{"a b", false},
		{"a:b", false},
		{"a\x00b", false},
		{"é", false},
		{"\xff", false},
		{"tab\t", false},
	} {
		err := Check(c.name)
		if (err == nil) != c.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), Rule)) {
			t.Errorf("Check(%q) = %v: want ErrInvalid and the rule", c.name, err)
		}
	}
}

func TestCollides(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a_b", true},
		{"a_b", "a.b", true},
		{"x.y_z", "x_y.z", true},
		{"a.b", "a.b", false}, // the same name is not a collision
		{"a.b", "a.c", false},
		{"ab", "a_b", false},
		{"a.b", "a-b", false},
	} {
		if got := Collides(c.a, c.b); got != c.want {
			t.Errorf("Collides(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
