package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs/query"
)

func init() { extraCommands = append(extraCommands, newQueryCommand) }

func newQueryCommand() *cobra.Command {
	var (
		warehouse, format, cacheDir, cacheSize, timezone, memory string
		limit                                                    int64
		explain, tables                                          bool
		threads                                                  int
	)
	cmd := &cobra.Command{
		Use:   `query --warehouse URI "SQL"`,
		Short: "Run SQL (embedded DuckDB) over the loaded datasets of a warehouse",
		Long: `Each dataset (a job's output directory under the warehouse) is a table named after it,
with its Hive partition columns dt (DATE) and hr (INTEGER). A dataset whose writer schema
evolved is one table with the merged schema: every version's columns, NULL where a file has
none, widened types (int to long, float to double) cast to the widest. Only committed files are read
(from the manifests), and a filter on dt / hr opens only those partitions' files.
HDFS files are copied to a bounded local cache first. A query reads the warehouse's tables
and files and nothing else: no other path, no URL, no DuckDB extension. CSV and JSON output
stream row by row; the table format holds its first 1,000 rows to size its columns.`,
		Example: `  sluice query --warehouse file:///var/warehouse --tables
  sluice query --warehouse hdfs://127.0.0.1:9000/warehouse \
    "SELECT hr, count(*) FROM pageviews WHERE dt = '2024-05-01' GROUP BY hr ORDER BY hr"`,
		Args: func(c *cobra.Command, args []string) error {
			if tables && len(args) > 0 {
				return fmt.Errorf("query: --tables takes no SQL")
			}
			if !tables && len(args) != 1 {
				return fmt.Errorf("query: give one SQL query in quotes (or --tables)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if warehouse == "" {
				return fmt.Errorf("query: --warehouse URI is required (file:///dir or hdfs://host:port/dir)")
			}
			switch format {
			case query.FormatTable, query.FormatCSV, query.FormatJSON:
			default:
				return fmt.Errorf("query: --format %q: use table, csv or json", format)
			}
			size, err := parseBytes(cacheSize)
			if err != nil {
				return fmt.Errorf("query: --cache-size %q: %v", cacheSize, err)
			}
			var memoryBytes int64
			if memory != "" {
				if memoryBytes, err = parseBytes(memory); err != nil {
					return fmt.Errorf("query: --memory-limit %q: %v", memory, err)
				}
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			e, err := query.Open(ctx, warehouse, query.Options{CacheDir: cacheDir, CacheBytes: size,
				Threads: threads, MemoryBytes: memoryBytes, TimeZone: timezone, Warnings: c.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer e.Close()
			out := c.OutOrStdout()
			if tables {
				ts, err := e.Tables(ctx)
				if err != nil {
					return err
				}
				return query.WriteTables(out, ts, format)
			}
			if explain {
				p, err := e.Plan(ctx, args[0])
				if err != nil {
					return err
				}
				return query.WriteExplain(out, e.Warehouse(), p)
			}
			rows, _, err := e.Query(ctx, args[0])
			if err != nil {
				return err
			}
			defer rows.Close()
			if _, err := query.Write(out, rows, query.Output{Format: format, Limit: limit, Location: e.Location()}); err != nil {
				if errors.Is(err, query.ErrSQL) || errors.Is(err, query.ErrOutsideWarehouse) {
					return err // already one line, saying what
				}
				return fmt.Errorf("%w: %s", query.ErrSQL, strings.ReplaceAll(err.Error(), "\n", " | "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&warehouse, "warehouse", "", "the warehouse: file:///dir or hdfs://host:port/dir (its subdirectories are the jobs' outputs)")
	f.StringVar(&format, "format", query.FormatTable, "output: table, csv or json")
	f.Int64Var(&limit, "limit", 0, "print at most this many rows (0: all)")
	f.BoolVar(&explain, "explain", false, "print the files the query would read, and run nothing")
	f.BoolVar(&tables, "tables", false, "list the datasets with their columns, partitions, rows and bytes, and their writer schemas (versions, columns, partitions)")
	f.StringVar(&cacheDir, "cache-dir", query.DefaultCacheDir(), "local cache of HDFS files")
	f.StringVar(&cacheSize, "cache-size", "4GiB", "bound of the local cache (B, KiB, MiB, GiB)")
	f.IntVar(&threads, "threads", 0, "DuckDB threads (0: one per core)")
	f.StringVar(&memory, "memory-limit", "", "DuckDB's memory limit, which holds the result and spills beyond it under --cache-dir (default: DuckDB's, 80% of RAM)")
	f.StringVar(&timezone, "timezone", "UTC", "time zone in which timestamps print and date functions work (IANA name)")
	return cmd
}

// parseBytes reads "4GiB", "512MiB", "100KiB" or a plain byte count.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
			if err != nil || v <= 0 {
				return 0, fmt.Errorf("want a positive size such as 4GiB")
			}
			return v * u.mult, nil
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("want a positive size such as 4GiB")
	}
	return v, nil
}
