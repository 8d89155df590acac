package server

// DescribeLogDirs (key 35), versions 1-4: the data directory is the one log
// dir; each partition reports its size on disk, offset lag 0 and no future
// replica. Null topics ask for every partition. v4's total and usable bytes
// come from statfs(2) of the data dir (-1 when the data dir is not on the
// OS file system). Requested partitions are de-duplicated.

import (
	"path/filepath"
	"sort"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/vfs"
)

func handleDescribeLogDirs(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = s.opts.DataDir
	if abs, err := filepath.Abs(s.opts.DataDir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if _, onDisk := s.opts.FS.(vfs.OS); onDisk {
		var st syscall.Statfs_t
		if err := syscall.Statfs(s.opts.DataDir, &st); err == nil {
			dir.TotalBytes = int64(st.Blocks) * st.Bsize
			dir.UsableBytes = int64(st.Bavail) * st.Bsize
		}
	}
	wanted := map[string]map[int32]bool{} // nil map for a topic = all its partitions
	all := req.Topics == nil
	for _, t := range req.Topics {
		if wanted[t.Topic] == nil {
			wanted[t.Topic] = map[int32]bool{}
		}
		for _, p := range t.Partitions {
			wanted[t.Topic][p] = true
		}
	}
	for _, t := range s.topics.list() {
		want, ok := wanted[t.name]
		if !all && !ok {
			continue
		}
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for _, p := range t.parts {
			if !all && !want[p.tp.Partition] {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p.tp.Partition, p.log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		sort.Slice(dt.Partitions, func(i, j int) bool { return dt.Partitions[i].Partition < dt.Partitions[j].Partition })
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return kmsgReply{resp}, nil
}
