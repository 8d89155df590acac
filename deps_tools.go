//go:build tools

// This file pins the project's chosen dependencies (DESIGN.md) in go.mod while
// the packages that use them are being written. It is never compiled.
package tools

import (
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/colinmarc/hdfs/v2"
	_ "github.com/duckdb/duckdb-go/v2"
	_ "github.com/expr-lang/expr"
	_ "github.com/go-zookeeper/zk"
	_ "github.com/hamba/avro/v2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/twmb/franz-go/pkg/sr"
	_ "gopkg.in/yaml.v3"
)
