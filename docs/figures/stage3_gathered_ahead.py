# Stage 3 figures of docs/zero-comm.md section 9a, from any zerosim version's JSON outputs:
#   python3 docs/figures/stage3_gathered_ahead.py PREDICT.json SCHEDULE.json
# Per step: exposed communication and the largest gathered-ahead bytes, a fetch-stream all_gather
# counted from its end until the first later compute segment using one of its parameters starts
# (the rule of sim/timing/gathered_memory.cpp, recomputed from predict --format json and
# schedule --format json of the same inputs).
import json, sys
pred = json.load(open(sys.argv[1])); sched = json.load(open(sys.argv[2]))
ops = sched["ops"]; times = {o["id"]: (o["start_ms"], o["end_ms"]) for o in pred["ops"]}
numel = [p["numel"] for p in sched["parameters"]]
width = {"bf16": 2, "fp16": 2, "fp32": 4}[sched["meta"]["model_dtype"]]
pending = {}; edges = {}
for o in ops:
    if o["step"] < 0: continue
    if o["stream"] == "fetch" and o["kind"] == "all_gather_into_tensor":
        for q in o["params"]: pending.setdefault(q, []).append(o["id"])
        continue
    if o["kind"] != "compute": continue
    for q in o["params"]:
        gs = pending.get(q, [])
        for g in list(gs):
            go = ops[g]; a = times[g][1]; b = times[o["id"]][0]
            if b > a:
                byt = sum(numel[r] for r in go["params"]) * width
                edges.setdefault(go["step"], []).extend([(a, byt), (b, -byt)])
            for r in go["params"]:
                pending[r] = [x for x in pending.get(r, []) if x != g]
for st in pred["steps"]:
    e = sorted(edges.get(st["step"], [])); lvl = peak = 0
    for t, b in e: lvl += b; peak = max(peak, lvl)
    extra = ""
    if "gathered_peak_bytes" in st: extra = " gathered_peak %.3f GiB (engine ahead %.3f GiB)" % (st["gathered_peak_bytes"]/2**30, st["gathered_ahead_peak_bytes"]/2**30)
    print("step %d: step %.1f ms, compute %.1f ms, exposed comm %.1f ms, gathered ahead peak %.2f GiB%s" % (st["step"], st["step_ms"], st["compute_ms"], st["exposed_comm_ms"], peak/2**30, extra))
