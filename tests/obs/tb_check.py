"""Reads a run's TensorBoard event files with the real TensorBoard reader (EventAccumulator, as
`tensorboard --logdir` does, orphan purging on restarts included) and checks that it holds exactly the values
of metrics.jsonl: every numeric field of every event with a step, as "<event>/<field>" (arrays per rank as
"<event>/<field>/r<rank>"), the last line of each step winning where a resumed run repeated steps. TensorBoard
keeps scalars as float32, so values are compared after rounding to float32, exactly.

Usage: tb_check.py RUN_DIR [--histograms TAG:COUNT ...]
Prints a summary; exits 1 naming the first differences.
"""
import json
import math
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea


def expected(run_dir):
    want = {}
    for line in open(f"{run_dir}/metrics.jsonl"):
        e = json.loads(line)
        if e["event"] == "resumed":  # TensorBoard drops what earlier processes logged after this step
            want = {k: v for k, v in want.items() if k[1] <= e["step"]}
        if "step" not in e or not isinstance(e["step"], int):
            continue
        for k, v in e.items():
            if k in ("event", "step"):
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                want[(f"{e['event']}/{k}", e["step"])] = v
            elif isinstance(v, list) and all(isinstance(x, (int, float)) or x is None for x in v):
                for r, x in enumerate(v):
                    if x is not None:
                        want[(f"{e['event']}/{k}/r{r}", e["step"])] = x
    return want


def main():
    run_dir = sys.argv[1]
    hist = [a.rsplit(":", 1) for a in sys.argv[3:]] if len(sys.argv) > 2 and sys.argv[2] == "--histograms" else []
    acc = ea.EventAccumulator(f"{run_dir}/tensorboard", size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    got = {}
    for tag in acc.Tags()["scalars"]:
        for s in acc.Scalars(tag):
            if (tag, s.step) in got:
                sys.exit(f"FAIL: TensorBoard shows {tag} at step {s.step} twice")
            got[(tag, s.step)] = s.value
    want = expected(run_dir)
    problems = []
    for key in sorted(set(want) | set(got)):
        if key not in got:
            problems.append(f"{key} = {want[key]} in metrics.jsonl, missing in TensorBoard")
        elif key not in want:
            problems.append(f"{key} = {got[key]} in TensorBoard only (an orphan of an earlier process?)")
        elif np.float32(want[key]) != np.float32(got[key]):
            problems.append(f"{key}: metrics.jsonl {want[key]!r} (float32 {np.float32(want[key])!r}), "
                            f"TensorBoard {got[key]!r}")
    for tag, count in hist:
        if tag not in acc.Tags()["histograms"]:
            problems.append(f"histogram {tag} missing (have {sorted(acc.Tags()['histograms'])[:5]}...)")
            continue
        for h in acc.Histograms(tag):
            if h.histogram_value.num != int(count):
                problems.append(f"histogram {tag} at step {h.step}: {h.histogram_value.num} values, want {count}")
    if problems:
        print("FAIL: TensorBoard differs from metrics.jsonl:\n  " + "\n  ".join(problems[:20]), file=sys.stderr)
        sys.exit(1)
    steps = sorted({s for _, s in got})
    print(f"ok: {len(got)} scalars in {len({t for t, _ in got})} tags at steps {steps} equal metrics.jsonl; "
          f"{len(hist)} histogram tags checked")


if __name__ == "__main__":
    main()
