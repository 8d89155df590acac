package server

import (
	"bytes"
	"testing"
)

func TestFrameBuffers(t *testing.T) {
	for _, tc := range []struct{ size, class, capacity int }{
		{1, 0, 4 << 10}, {4 << 10, 0, 4 << 10}, {4<<10 + 1, 1, 8 << 10},
		{100 << 10, 5, 128 << 10}, {1 << 20, 8, 1 << 20},
	} {
		if c := frameClass(tc.size); c != tc.class {
			t.Fatalf("frameClass(%d) = %d, want %d", tc.size, c, tc.class)
		}
		b := getFrame(tc.size)
		if len(b) != tc.size || cap(b) != tc.capacity {
			t.Fatalf("getFrame(%d): len %d cap %d, want cap %d", tc.size, len(b), cap(b), tc.capacity)
		}
		putFrame(b)
	}
	if frameClass(1<<20+1) != -1 {
		t.Fatal("a frame above 1 MiB must not be pooled")
	}
	putFrame(make([]byte, 5000)) // not from getFrame: ignored
	if b := getFrame(5000); cap(b) != 8<<10 {
		t.Fatalf("foreign buffer of cap %d came back from the pool", cap(b))
	}
	// readBody: pooled and large frames read exactly, whatever a recycled
	// buffer held before.
	for _, size := range []int{10, 70 << 10, 1 << 20, 3<<20 + 7} {
		want := bytes.Repeat([]byte{byte(size)}, size)
		got, err := readBody(bytes.NewReader(want), size)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("readBody(%d): %v", size, err)
		}
		putFrame(got)
		if _, err := readBody(bytes.NewReader(want[:size-1]), size); err == nil {
			t.Fatalf("readBody(%d) of a truncated frame: no error", size)
		}
	}
}
