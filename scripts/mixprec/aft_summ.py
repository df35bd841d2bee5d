"""The trace's core bytes of tile_rounds() in amx_first_touch (--by-function JSON) against
what the program says its tile instructions move, and the tracer's tile restarts (the
`baseline` step of scripts/mixprec/mixprec.sh)."""
import json
import sys

d = json.load(open(sys.argv[1]))
p = d["points"][0]
want = int(open(sys.argv[2]).read().split()[-1])
rows = [r for r in p["extra"].get("by_function", []) if r["function"].startswith("tile_rounds")]
got = rows[0]["core_bytes"] if rows else None
print(f"{sys.argv[3]}: tile_rounds core bytes {got}, program says {want}, "
      f"excess {None if got is None else got - want}, tile_restarts {p['extra']['trace'].get('tile_restarts')}")
