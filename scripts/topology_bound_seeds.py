#!/usr/bin/env python3
"""Seeds for fuzz_topology at the physical bounds (topologies/README.md "Bounds", issue 33).

For each bounded figure of a real topology file, one seed per value: just inside and just outside
each end of its range, 0, -1, 1e308 and NaN written as text (not JSON: the reader must refuse it,
not crash). Usage: topology_bound_seeds.py TOPOLOGY.json OUT_DIR
"""
import json
import sys

# field path -> (low, low included, high, high included), as topologies/README.md "Bounds" states.
SHARE = (0, False, 1, True)
GBS = (0, False, 100000, True)
US = (0, True, 1000000, True)
BOUNDS = {
    "gpu.compute_efficiency": SHARE, "gpu.memory_efficiency": SHARE, "nics.efficiency": SHARE,
    "gpu.memory_bandwidth_gbs": GBS, "intra_node.bandwidth_gbs": GBS,
    "intra_node.nccl_channel_bandwidth_gbs": GBS, "nics.bandwidth_gbs": GBS,
    "host.pcie_gbps": (0, True, 100000, True), "host.cpu_adam_gbs": (0, True, 100000, True),
    "gpu.launch_overhead_us": US, "nics.latency_us": US, "host.hook_us": US, "host.kernel_launch_us": US,
    "gpu.peak_tflops.bf16": (0, False, 100000, True), "gpu.memory_gb": (0, False, 100000, True),
    "calibration.bandwidth_scale": (0.001, True, 1000, True), "calibration.latency_scale": (0.001, True, 1000, True),
    "network.oversubscription": (1, True, 1000, True), "network.background_spine_load": (0, True, 1, False),
}


def nudge(x, up):
    """The next value past x a reader can tell apart (relative 1e-9, or 1e-9 at 0)."""
    step = abs(x) * 1e-9 if x else 1e-9
    return x + step if up else x - step


def values(lo, lo_in, hi, hi_in):
    out = {"zero": 0, "negative": -1, "huge": 1e308}
    out["low-inside"] = lo if lo_in else nudge(lo, True)
    out["low-outside"] = nudge(lo, False) if lo_in else lo
    out["high-inside"] = hi if hi_in else nudge(hi, False)
    out["high-outside"] = nudge(hi, True) if hi_in else hi
    return out


def put(doc, path, value):
    *parents, last = path.split(".")
    for p in parents:
        doc = doc.setdefault(p, {})
    doc[last] = value


def main():
    base = json.load(open(sys.argv[1]))
    for k in ("sources", "description"):   # small seeds: libFuzzer's -max_len
        base.pop(k, None)
    out = sys.argv[2]
    for path, bound in BOUNDS.items():
        name = path.replace(".", "-")
        for tag, v in values(*bound).items():
            doc = json.loads(json.dumps(base))
            put(doc, path, v)
            open(f"{out}/bound-{name}-{tag}.json", "w").write(json.dumps(doc, indent=1))
        doc = json.loads(json.dumps(base))
        put(doc, path, 12345.5)   # replaced by a bare NaN token below
        open(f"{out}/bound-{name}-nan.json", "w").write(json.dumps(doc, indent=1).replace("12345.5", "NaN"))


if __name__ == "__main__":
    main()
