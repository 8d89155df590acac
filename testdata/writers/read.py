#!/usr/bin/env python3
"""Independent reader for sluice's writer tests.

usage: read.py parquet|avro FILE...
Prints one JSON object: {"rows": N, "types": {column: type}, "records": [...]}
read with pyarrow (Parquet) or fastavro (Avro). Values that JSON cannot hold
are printed with str() (timestamps in ISO 8601, decimals as digits).
"""
import datetime
import decimal
import json
import sys
import uuid


def plain(v):
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, tuple) and len(x) == 2 for x in v) and v and isinstance(v, list) and isinstance(v[0], tuple):
            return {k: plain(x) for k, x in v}
        return [plain(x) for x in v]
    return v


def read_parquet(paths):
    import pyarrow.parquet as pq
    import pyarrow as pa
    tables = [pq.read_table(p) for p in paths]
    t = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    types = {f.name: str(f.type) for f in t.schema}
    meta = pq.ParquetFile(paths[0]).schema
    logical = {}
    for i in range(len(meta)):
        c = meta.column(i)
        logical[c.path] = str(c.logical_type)
    return {"rows": t.num_rows, "types": types, "logical": logical,
            "records": [plain(r) for r in t.to_pylist()]}


def read_avro(paths):
    import fastavro
    rows = []
    types = {}
    codec = None
    for p in paths:
        with open(p, "rb") as f:
            r = fastavro.reader(f)
            codec = r.codec
            for fld in r.writer_schema["fields"]:
                types[fld["name"]] = json.dumps(fld["type"], sort_keys=True)
            rows.extend(r)
    return {"rows": len(rows), "types": types, "codec": codec, "records": [plain(r) for r in rows]}


def main():
    kind, paths = sys.argv[1], sys.argv[2:]
    out = read_parquet(paths) if kind == "parquet" else read_avro(paths)
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    main()
