package log

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/broker/log/vfs"
)

func TestAppendReadBasic(t *testing.T) {
	m, err := OpenManager(ManagerOptions{FS: vfs.NewMem(), Dir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Open(TopicPartition{"t", 0}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 5; i++ {
		b := simpleBatch(3, 10, 1000, byte('a'+i))
		res, err := l.Append(b, AppendOptions{AssignOffsets: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(3*i) || res.LastOffset != int64(3*i+2) {
			t.Fatalf("append %d: %+v", i, res)
		}
		want = append(want, b...)
	}
	if leo := l.LogEndOffset(); leo != 15 {
		t.Fatalf("LEO %d", leo)
	}
	r, err := l.Read(0, 1<<20, 15)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
}
