#!/usr/bin/python3
"""PyTorch training-step throughput for cnntrain's benchmark models (same architectures, batch, threads).

Run by build/bench/train_bench (`make bench`), which talks to it over stdin/stdout so that both frameworks
are measured alternately in one run: with PyTorch 2 from PyPI (build/pyvenv, `make pyvenv`) as the peer the
targets are stated against, and Debian's PyTorch 1.13 (/usr/bin/python3) as a second column. Protocol: one
request per line, `MODEL THREADS BATCH STEPS` (THREADS: a comma list of thread counts to choose from),
answered by `ips IMAGES_PER_S MODE THREADS [MODE=IMAGES_PER_S ...]`: the first request for a model and batch
tries every mode (eager contiguous, eager channels_last, and torch.compile where the PyTorch has it) with
every thread count in a short trial and keeps the fastest setting ("PyTorch at its best"); the trailing
fields are each mode's trial figure at its best thread count. `quit` ends.
Stand-alone:
  build/pyvenv/bin/python tests/bench/torch_bench.py --model resnet20 --threads 1,2 [--batch 128 --steps 20]
  build/pyvenv/bin/python tests/bench/torch_bench.py --model resnet20 --threads 2 --profile  # torch.profiler
"""
import argparse
import sys
import time

import torch
import torch.nn as nn

# The zoo's networks, shared with the parity test (tests/parity/torch_parity.py): fmnist_cnn with batch norm and
# bias-free convolutions, resnet20 with option-A shortcuts, exactly as cnntrain builds them.
from torch_zoo import ZOO, fmnist_cnn, lenet5

resnet20 = ZOO["resnet20"]


def resnet20_plain():
    """ResNet-20's convolutions without BN or shortcuts (what cnntrain can build before BN exists): 3x3 conv +
    ReLU, 16/32/64 channels at 32x32/16x16/8x8 (stride-2 convs start stages 2 and 3), 8x8 max pool, linear."""
    layers, c_in = [], 3
    for stage, c in enumerate((16, 32, 64)):
        for i in range(7 if stage == 0 else 6):
            stride = 2 if stage > 0 and i == 0 else 1
            layers += [nn.Conv2d(c_in, c, 3, stride=stride, padding=1), nn.ReLU()]
            c_in = c
    return nn.Sequential(*layers, nn.MaxPool2d(8), nn.Flatten(), nn.Linear(64, 10))


def resnet50():
    """torchvision's ResNet-50 (v1.5, as cnntrain's zoo), 10 classes."""
    return ZOO["resnet50"](3, 10, 224)


def mobilenet_v2():
    """torchvision's MobileNetV2 (cnntrain's zoo mobilenet_v2 follows it), 10 classes."""
    import torchvision
    return torchvision.models.mobilenet_v2(num_classes=10)


MODELS = {"lenet5": (lenet5, (1, 28, 28)), "fmnist_cnn": (fmnist_cnn, (1, 28, 28)),
          "resnet20_plain": (resnet20_plain, (3, 32, 32)), "resnet20": (resnet20, (3, 32, 32)),
          "resnet50": (resnet50, (3, 224, 224)), "mobilenet_v2": (mobilenet_v2, (3, 224, 224))}
# torch.compile (inductor, C++ kernels for the CPU) exists from PyTorch 2.0 on; Debian's 1.13 runs eager only.
MODES = ("contiguous", "channels_last") + (("compile",) if hasattr(torch, "compile") else ())
_best = {}  # (model, batch, thread choices) -> (mode, threads, step function, {mode: trial images/s})
_steps = {}  # (model, batch, mode) -> step function: a compiled step is compiled once, for every thread count


def step_fn(name, batch, mode):
    key = (name, batch, mode)
    if key in _steps:
        return _steps[key]
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build()
    x = torch.rand(batch, *shape) * 2 - 1
    y = torch.randint(0, 10, (batch,))
    if mode == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    # Forward and backward compiled (the optimizer step stays eager, as in PyTorch's own training recipes).
    run = torch.compile(model) if mode == "compile" else model

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(run(x), y)
        loss.backward()
        opt.step()
    _steps[key] = step
    return step


def timed(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


def measure(name, threads, batch, steps):
    """images/s over `steps` steps in the fastest (mode, thread count) for this model and batch, the mode and
    thread count, and each mode's trial images/s at its best thread count."""
    key = (name, batch, tuple(threads))
    if key not in _best:
        trial = {}
        warm, runs = (3, 2) if steps > 1 else (2, 1)
        for t in threads:
            torch.set_num_threads(t)
            for mode in MODES:
                s = step_fn(name, batch, mode)
                for _ in range(warm):  # the first call of a compiled step compiles
                    s()
                trial[(mode, t)] = min(timed(s, steps) for _ in range(runs))
        mode, t = min(trial, key=trial.get)
        per_mode = {m: batch * steps / min(v for (mm, _), v in trial.items() if mm == m) for m in MODES}
        _best[key] = (mode, t, step_fn(name, batch, mode), per_mode)
    mode, t, s, per_mode = _best[key]
    torch.set_num_threads(t)
    return batch * steps / timed(s, steps), mode, t, per_mode


def profile(name, threads, batch, steps, mode):
    """PyTorch's own per-op breakdown of `steps` training steps (after warm-up), sorted by self CPU time."""
    torch.set_num_threads(threads)
    s = step_fn(name, batch, mode)
    for _ in range(3):
        s()
    with torch.autograd.profiler.profile() as prof:
        for _ in range(steps):
            s()
    print(f"{name} batch {batch}, {threads} threads, {mode}, {steps} steps (torch {torch.__version__}); "
          f"times are totals over the steps")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help="answer requests on stdin (used by train_bench)")
    ap.add_argument("--model", default="fmnist_cnn", choices=sorted(MODELS))
    ap.add_argument("--threads", default="1", help="thread count, or a comma list to pick the fastest from")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="print torch.autograd.profiler's per-op table")
    ap.add_argument("--format", default="channels_last", choices=MODES, help="mode for --profile")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if a.profile:
        profile(a.model, threads[0], a.batch, a.steps, a.format)
        return
    if not a.serve:
        ips, mode, t, per_mode = measure(a.model, threads, a.batch, a.steps)
        print(f"{a.model} batch {a.batch}: {ips:.1f} images/s ({mode}, {t} threads, torch {torch.__version__}); "
              "trial: " + ", ".join(f"{m} {v:.1f}" for m, v in per_mode.items()))
        return
    print(f"ready torch {torch.__version__}", flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f or f[0] == "quit":
            break
        ips, mode, t, per_mode = measure(f[0], [int(t) for t in f[1].split(",")], int(f[2]), int(f[3]))
        print(f"ips {ips:.3f} {mode} {t} " + " ".join(f"{m}={v:.3f}" for m, v in per_mode.items()), flush=True)


if __name__ == "__main__":
    main()
