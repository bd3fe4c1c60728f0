"""Cases per operation and phase, and the statuses answered, from
schemathesis ndjson reports (scripts/fuzz_api.sh prints it after each run)."""
import collections
import json
import sys

for path in sys.argv[1:]:
    cases = collections.Counter()
    statuses = collections.Counter()
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            done = event.get("ScenarioFinished")
            if not done:
                continue
            recorder = done["recorder"]
            for case in recorder.get("cases", {}).values():
                v = case["value"]
                cases[(f'{v["method"]} {v["path"]}', done["phase"])] += 1
            for inter in recorder.get("interactions", {}).values():
                resp = inter.get("response") or {}
                req = inter.get("request") or {}
                op = f'{req.get("method", "?")} {req.get("uri", "?").split("?")[0]}'
                statuses[resp.get("status_code", "none")] += 1
    print(f"{path}:")
    ops = sorted({op for op, _ in cases})
    for op in ops:
        per = {ph: n for (o, ph), n in cases.items() if o == op}
        total = sum(per.values())
        print(f"  {op}: {total} cases ({', '.join(f'{p} {n}' for p, n in sorted(per.items()))})")
    print(f"  statuses answered: {dict(sorted(statuses.items(), key=str))}")
