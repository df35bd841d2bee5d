"""One line per roofline report point: name, threads, median seconds, and its rate (GFLOP/s,
or GOP/s for integer work), for the logs of scripts/mixprec/mixprec.sh."""
import json
import sys

for path in sys.argv[1:]:
    for p in json.load(open(path))["points"]:
        f = p["flops"]
        ops = f.get("int_ops") or f.get("total") or 0
        unit = "GOP/s" if f.get("int_ops") else "GFLOP/s"
        print(f"{p['name']} threads={p['threads']} median={p['seconds'] * 1e3:.3f} ms "
              f"best={min(p['seconds_samples']) * 1e3:.3f} ms {ops / p['seconds'] / 1e9:.1f} {unit} "
              f"(best {ops / min(p['seconds_samples']) / 1e9:.1f}) classes={sorted(k for k, v in f['by_class'].items() if v)}")
