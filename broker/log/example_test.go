package log_test

import (
	"fmt"
	"os"

	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/vfs"
)

func Example() {
	dir, _ := os.MkdirTemp("", "sluice-example-")
	defer os.RemoveAll(dir)
	m, err := plog.OpenManager(plog.ManagerOptions{FS: vfs.OS{}, Dir: dir})
	if err != nil {
		panic(err)
	}
	l, err := m.Open(plog.TopicPartition{Topic: "pageviews", Partition: 0}, plog.DefaultConfig())
	if err != nil {
		panic(err)
	}
	// An empty append is rejected: Append takes RecordBatch v2 bytes as a
	// Produce request carries them.
	_, err = l.Append(nil, plog.AppendOptions{AssignOffsets: true})
	fmt.Println(plog.IsCorrupt(err), l.LogEndOffset())
	r, err := l.Read(0, 1<<20, l.HighWatermark())
	fmt.Println(r.Len(), err)
	r.Close()
	fmt.Println(m.Close())
	// Output:
	// true 0
	// 0 <nil>
	// <nil>
}
