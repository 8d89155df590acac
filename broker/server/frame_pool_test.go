package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
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
	// buffer held before; the memory reserved follows the buffer and is all
	// given back after a truncated frame.
	mem := newRequestMemory(-1, newMetrics())
	readBody := func(r io.Reader, size int) ([]byte, int64, error) {
		c := &conn{s: &Server{reqMem: mem}, br: bufio.NewReaderSize(r, 64<<10), ctx: context.Background()}
		return c.readBody(frameID{c, 1}, size)
	}
	for _, size := range []int{10, 70 << 10, 1 << 20, 3<<20 + 7} {
		want := bytes.Repeat([]byte{byte(size)}, size)
		got, reserved, err := readBody(bytes.NewReader(want), size)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("readBody(%d): %v", size, err)
		}
		if reserved != int64(cap(got)) || mem.inUse() != reserved {
			t.Fatalf("readBody(%d): reserved %d (pool %d) for a buffer of cap %d", size, reserved, mem.inUse(), cap(got))
		}
		mem.release(reserved)
		putFrame(got)
		if _, _, err := readBody(bytes.NewReader(want[:size-1]), size); err == nil {
			t.Fatalf("readBody(%d) of a truncated frame: no error", size)
		}
		if mem.inUse() != 0 {
			t.Fatalf("readBody(%d) of a truncated frame kept %d bytes reserved", size, mem.inUse())
		}
	}
	// A frame that announces 100 MiB and sends 3 MiB holds a buffer that
	// follows what arrived, not what was announced.
	partial := bytes.Repeat([]byte{1}, 3<<20)
	c := &conn{s: &Server{reqMem: mem}, br: bufio.NewReaderSize(bytes.NewReader(partial), 64<<10), ctx: context.Background()}
	if _, _, err := c.readBody(frameID{c, 1}, 100<<20); err == nil {
		t.Fatal("readBody of a truncated 100 MiB frame: no error")
	}
}
