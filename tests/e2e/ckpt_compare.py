#!/usr/bin/env python3
"""Compares the parameters and optimizer state of two cnntrain checkpoints.
Usage: ckpt_compare.py A.h5 B.h5 [--rtol X] [--buffers]   exit 0 when equal (bit for bit without --rtol;
with it, every parameter within |a-b| <= X (1e-3 + |b|) and every optimizer-state element (momentum, Adam
moments) within |a-b| <= X (|b| + max|b| of its tensor): the state accumulates gradients, whose small entries
carry the summation-order rounding of the tensor's large ones when the rank count changes).
Batch-norm buffers (running statistics, and their moving average ema/*.running_*) are compared only with
--buffers: a checkpoint stores their mean over the ranks, so they match an uninterrupted run only where that
run also wrote a checkpoint."""
import sys
import h5py
import numpy as np


with_buffers = "--buffers" in sys.argv


def is_buffer(name):
    return name.startswith("buffers/") or (name.startswith("ema/") and ".running_" in name)


def arrays(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and (with_buffers or not is_buffer(name)):
                out[name] = obj[()]
        f.visititems(visit)
        meta = {k: f.attrs[k] for k in ("step", "world_size")}
    return out, meta


def main():
    a, b = sys.argv[1], sys.argv[2]
    rtol = float(sys.argv[sys.argv.index("--rtol") + 1]) if "--rtol" in sys.argv else None
    (xa, ma), (xb, mb) = arrays(a), arrays(b)
    if sorted(xa) != sorted(xb):
        sys.exit(f"different datasets: {sorted(set(xa) ^ set(xb))}")
    if int(ma["step"]) != int(mb["step"]):
        sys.exit(f"different steps: {ma['step']} vs {mb['step']}")
    worst, worst_name = 0.0, ""
    compared = [n for n in xa if not is_buffer(n)]
    if rtol is not None and not any(n.startswith("optimizer/") for n in compared):
        sys.exit(f"no optimizer state in {a}: nothing beyond the parameters to compare")
    for name in sorted(xa):
        u, v = xa[name], xb[name]
        if rtol is None:
            if u.tobytes() != v.tobytes():
                d = np.abs(u.astype(np.float64) - v).max()
                sys.exit(f"{name} differs (max abs diff {d:g}) between {a} and {b}")
        elif not is_buffer(name):
            floor = np.abs(v).max() if name.startswith("optimizer/") else 1e-3
            err = np.abs(u.astype(np.float64) - v) / (floor + np.abs(v))
            if float(err.max()) > worst:
                worst, worst_name = float(err.max()), name
    if rtol is not None and worst > rtol:
        sys.exit(f"{worst_name} differs by up to {worst:g} (relative) > {rtol:g}")
    print(f"equal: {len(xa)} datasets at step {int(ma['step'])}" + (f" (max rel diff {worst:.2g})" if rtol else " (bitwise)"))


main()
