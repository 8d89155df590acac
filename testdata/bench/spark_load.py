"""spark_load.py — the Apache Spark side of testdata/bench/load.sh.

The batch load most teams run in place of Camus, doing what `sluice load run`
does with the bench job: read explicit Kafka offset ranges, strip the
Confluent header (magic byte and 4-byte schema id), decode the Avro with the
schema from the registry, add the record's topic/partition/offset/timestamp
(the loader's metadata_columns), derive dt (yyyy-MM-dd) and hr (HH) in UTC
from the record's `ts`, and write Parquet-zstd partitioned by dt, hr.

Run by load.sh through spark-submit with the Kafka source and spark-avro jars:
  spark-submit --master local[2] --jars ... spark_load.py \
    --bootstrap 127.0.0.1:9092 --topic pageviews --offsets '{"0":[0,1250000],...}' \
    --registry http://127.0.0.1:8081 --out /tmp/x/spark
  (or --schema-file pageview.avsc for bare Avro values)
With --startup-only it starts and stops a session around a one-row job: the
fixed cost (JVM, Spark, Python driver) that every load above pays once.
"""

import argparse
import json
import sys
import urllib.request

from pyspark.sql import SparkSession
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.functions import col, date_format, expr


def registry_schema(url, subject):
    """The latest schema registered under subject, as Avro JSON text."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/subjects/{subject}/versions/latest", timeout=30) as r:
        return json.load(r)["schema"]


def session():
    spark = (SparkSession.builder.appName("sluice-bench-spark-load")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false")
             # Avro timestamp-millis stays millis (the loader writes the same), not INT96.
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap")
    ap.add_argument("--topic")
    ap.add_argument("--offsets", help='JSON {"partition": [start, end), ...}: the ranges to load')
    ap.add_argument("--registry", help="schema registry URL (values are Confluent-framed)")
    ap.add_argument("--schema-file", help="Avro schema (.avsc) of unframed values")
    ap.add_argument("--out", help="output directory (replaced)")
    ap.add_argument("--startup-only", action="store_true", help="only start and stop Spark")
    a = ap.parse_args()
    if a.startup_only:
        spark = session()
        spark.range(1).count()
        spark.stop()
        return
    for need in ("bootstrap", "topic", "offsets", "out"):
        if getattr(a, need) is None:
            sys.exit(f"spark_load.py: --{need} is required")
    if (a.registry is None) == (a.schema_file is None):
        sys.exit("spark_load.py: give exactly one of --registry or --schema-file")
    if a.registry:
        schema = registry_schema(a.registry, a.topic + "-value")
    else:
        with open(a.schema_file) as f:
            schema = f.read()

    ranges = {int(p): (int(s), int(e)) for p, (s, e) in json.loads(a.offsets).items()}
    starting = json.dumps({a.topic: {str(p): s for p, (s, _) in ranges.items()}})
    ending = json.dumps({a.topic: {str(p): e for p, (_, e) in ranges.items()}})

    spark = session()
    raw = (spark.read.format("kafka")
           .option("kafka.bootstrap.servers", a.bootstrap)
           .option("subscribe", a.topic)
           .option("startingOffsets", starting)
           .option("endingOffsets", ending)
           .option("failOnDataLoss", "true")
           .load())
    # Confluent framing: byte 1 is the magic 0, bytes 2-5 the schema id; the
    # Avro binary starts at byte 6 (Spark SQL's substring is 1-based).
    value = expr("substring(value, 6)") if a.registry else col("value")
    rows = raw.select(
        from_avro(value, schema, {"mode": "FAILFAST"}).alias("v"),
        col("topic").alias("_topic"),
        col("partition").alias("_partition"),
        col("offset").alias("_offset"),
        col("timestamp").alias("_timestamp"),
    ).select("v.*", "_topic", "_partition", "_offset", "_timestamp")
    rows = (rows.withColumn("dt", date_format(col("ts"), "yyyy-MM-dd"))
            .withColumn("hr", date_format(col("ts"), "HH")))
    (rows.write.mode("overwrite")
     .option("compression", "zstd")
     .partitionBy("dt", "hr")
     .parquet(a.out))
    spark.stop()


if __name__ == "__main__":
    main()
