"""Confluent's Python serializers (ProtobufSerializer, JSONSerializer) make
the test data of the loader's Protobuf and JSON Schema decoders, and
pyarrow reads the loaded Parquet back.

  produce FORMAT: compiles testdata/order.proto (importing common.proto,
         which the serializer registers as a reference) with grpcio-tools,
         or takes the JSON Schema below; sends --count records to --topic
         through sluice's registry, and at each offset of --bad a record the
         decoder must refuse (framed with the same id). Writes what it sent,
         mapped as the loader's documentation says, to --expected.
  check: reads every Parquet file under --out with pyarrow and compares
         each row, field by field, with --expected (keyed by _offset).
"""
import argparse
import base64
import datetime
import glob
import importlib
import json
import os
import subprocess
import sys
import tempfile

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Customer",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "score": {"type": "number"},
        "active": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "nickname": {"type": ["string", "null"]},
    },
    "required": ["id", "name", "at"],
})


def iso(dt):
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def compile_proto():
    from grpc_tools import protoc
    out = tempfile.mkdtemp()
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{HERE}", f"-I{include}", f"--python_out={out}",
                      os.path.join(HERE, "common.proto"), os.path.join(HERE, "order.proto")])
    if rc != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, out)
    return importlib.import_module("order_pb2")


def order_value(pb, i):
    o = pb.Order(id=1_000_000_000_000 + i, small=-i, u32=4_000_000_000 + i, s64=-(1 << 40) - i,
                 f=0.25 * i, d=i / 3, flag=i % 2 == 0, name=f"order-{i}", raw=bytes([i % 256, 0, 255]),
                 status=i % 3, tags=[f"t{j}" for j in range(i % 4)])
    for j in range(i % 3):
        o.lines.add(sku=f"sku-{i}-{j}", qty=j + 1)
    for j in range(i % 3):
        o.counts[f"k{j}"] = j * 10
        o.labels[j - 1] = f"l{j}"
    if i % 2 == 0:
        o.price.currency, o.price.units = "EUR", i * 100
    if i % 3 == 0:
        o.card = f"card-{i}"
    elif i % 3 == 1:
        o.voucher = i
    if i % 4 != 3:
        o.at.FromDatetime(datetime.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=i))
    if i % 5 != 4:
        o.took.FromMicroseconds(1_500_000 + i)
    if i % 2 == 1:
        o.note.value = f"note {i}"
    if i % 3 == 2:
        o.maybe.value = -i
    if i % 2 == 0:
        o.attrs.update({"n": i, "s": "x", "nested": {"b": True}})
    if i % 4 == 0:
        o.opt = i
    return o


def order_expected(pb, o):
    return {
        "id": o.id, "small": o.small, "u32": o.u32, "s64": o.s64, "f": o.f, "d": o.d, "flag": o.flag,
        "name": o.name, "raw": base64.b64encode(o.raw).decode(), "status": pb.Order.Status.Name(o.status),
        "tags": list(o.tags), "lines": [{"sku": l.sku, "qty": l.qty} for l in o.lines],
        "counts": sorted([k, v] for k, v in o.counts.items()),
        "labels": sorted([[k, v] for k, v in o.labels.items()]),
        "price": {"currency": o.price.currency, "units": o.price.units} if o.HasField("price") else None,
        "card": o.card if o.WhichOneof("payment") == "card" else None,
        "voucher": o.voucher if o.WhichOneof("payment") == "voucher" else None,
        "at": iso(o.at.ToDatetime(tzinfo=datetime.timezone.utc)) if o.HasField("at") else None,
        "took": o.took.ToMicroseconds() if o.HasField("took") else None,
        "note": o.note.value if o.HasField("note") else None,
        "maybe": o.maybe.value if o.HasField("maybe") else None,
        "attrs": json.loads(__import__("google.protobuf.json_format", fromlist=["x"]).MessageToJson(o.attrs)) if o.HasField("attrs") else None,
        "opt": o.opt if o.HasField("opt") else None,
    }


def customer_value(i):
    v = {"id": i, "name": f"c{i}", "at": f"2024-05-01T10:{i % 60:02d}:00.{i:06d}Z", "tags": [f"t{j}" for j in range(i % 3)]}
    if i % 2 == 0:
        v["score"], v["active"] = i + 0.5, i % 4 == 0
        v["address"] = {"city": f"city{i}", "zip": None if i % 4 == 0 else f"{10000 + i}"}
        v["attrs"] = {f"a{j}": j for j in range(i % 3)}
    if i % 3 == 0:
        v["either"] = f"s{i}"
    elif i % 3 == 1:
        v["either"] = i
    v["nickname"] = None if i % 5 == 0 else f"nick{i}"
    return v


def customer_expected(v):
    at = datetime.datetime.strptime(v["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    addr = v.get("address")
    return {
        "id": v["id"], "name": v["name"], "score": v.get("score"), "active": v.get("active"), "at": iso(at),
        "tags": v["tags"], "address": None if addr is None else {"city": addr.get("city"), "zip": addr.get("zip")},
        "attrs": None if "attrs" not in v else sorted([k, x] for k, x in v["attrs"].items()),
        "either": v.get("either"), "nickname": v.get("nickname"),
    }


def produce(args):
    registry = SchemaRegistryClient({"url": args.registry})
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all"})
    ctx = SerializationContext(args.topic, MessageField.VALUE)
    bad = {int(x) for x in args.bad.split(",") if x}
    expected, header = {}, None
    if args.format == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        pb = compile_proto()
        ser = ProtobufSerializer(pb.Order, registry, {"use.deprecated.format": False})
        make = lambda i: (lambda o: (ser(o, ctx), order_expected(pb, o)))(order_value(pb, i))
        junk = b"\x02\x02\xff\xff\xff\xff"  # index list [1], then a truncated varint
    else:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer
        ser = JSONSerializer(JSON_SCHEMA, registry)
        make = lambda i: (lambda v: (ser(v, ctx), customer_expected(v)))(customer_value(i))
        junk = json.dumps({"id": "not an integer", "name": "x", "at": "2024-05-01T10:00:00Z"}).encode()
    for i in range(args.count):
        if i in bad:
            producer.produce(args.topic, value=header + junk)
            continue
        value, exp = make(i)
        header = header or value[:5]
        expected[i] = exp
        producer.produce(args.topic, value=value)
        producer.flush(30)  # one by one: offset i is record i
    if producer.flush(30) != 0:
        sys.exit("produce: records left unsent after 30 s")
    with open(args.expected, "w") as f:
        json.dump({"format": args.format, "rows": expected}, f)
    print(int.from_bytes(header[1:5], "big"))


def normalize(fmt, row):
    out = {}
    for k, v in row.items():
        if k.startswith("_"):
            continue
        if isinstance(v, datetime.datetime):
            v = iso(v if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc))
        elif isinstance(v, bytes):
            v = base64.b64encode(v).decode()
        if k in ("counts", "attrs") and isinstance(v, list):
            v = sorted([a, b] for a, b in v)
        elif k == "labels" and v is not None:
            v = sorted([e["key"], e["value"]] for e in v)
        elif k in ("attrs", "either") and isinstance(v, str):
            v = json.loads(v)
        out[k] = v
    return out


def check(args):
    import pyarrow.parquet as pq
    with open(args.expected) as f:
        exp = json.load(f)
    want = {int(k): v for k, v in exp["rows"].items()}
    files = glob.glob(os.path.join(args.out, "dt=*", "hr=*", "*.parquet"))
    got = {}
    for path in files:
        for row in pq.read_table(path).to_pylist():
            if row["_offset"] in got:
                sys.exit(f"offset {row['_offset']} loaded twice")
            got[row["_offset"]] = normalize(exp["format"], row)
    if sorted(got) != sorted(want):
        sys.exit(f"offsets loaded {sorted(got)}, produced {sorted(want)}")
    for off, w in want.items():
        g = got[off]
        for field, wv in w.items():
            gv = g.get(field, "<missing column>")
            if isinstance(wv, float) and isinstance(gv, float):
                if abs(wv - gv) > 1e-9 * max(1, abs(wv)):
                    sys.exit(f"offset {off} field {field}: loaded {gv!r}, produced {wv!r}")
            elif gv != wv:
                sys.exit(f"offset {off} field {field}: loaded {gv!r}, produced {wv!r}")
        extra = set(g) - set(w)
        if extra:
            sys.exit(f"offset {off}: columns {sorted(extra)} not in the mapping")
    print(f"{len(want)} rows, {len(want[next(iter(want))])} fields each, equal")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["produce", "check"])
    p.add_argument("--format", choices=["protobuf", "json"])
    p.add_argument("--bootstrap")
    p.add_argument("--registry")
    p.add_argument("--topic")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--bad", default="")
    p.add_argument("--expected", required=True)
    p.add_argument("--out")
    args = p.parse_args()
    produce(args) if args.mode == "produce" else check(args)


if __name__ == "__main__":
    main()
