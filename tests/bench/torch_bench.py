#!/usr/bin/python3
"""PyTorch training-step throughput for cnntrain's benchmark models (same architectures, batch, threads).

Run by build/bench/train_bench (`make bench`), which talks to it over stdin/stdout so that both frameworks
are measured alternately in one run. Protocol: one request per line, `MODEL THREADS BATCH STEPS`, answered by
`ips IMAGES_PER_S FORMAT` (FORMAT: the memory format used, contiguous or channels_last, whichever was faster
for this model and thread count in a short trial, so PyTorch gets its best layout). `quit` ends.
Stand-alone: /usr/bin/python3 tests/bench/torch_bench.py --model fmnist_cnn --threads 2 [--batch 128 --steps 20]
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


MODELS = {"lenet5": (lenet5, (1, 28, 28)), "fmnist_cnn": (fmnist_cnn, (1, 28, 28)),
          "resnet20_plain": (resnet20_plain, (3, 32, 32)), "resnet20": (resnet20, (3, 32, 32))}
_best_format = {}


def step_fn(name, batch, fmt):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build()
    x = torch.rand(batch, *shape) * 2 - 1
    y = torch.randint(0, 10, (batch,))
    if fmt == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def timed(step, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


def measure(name, threads, batch, steps):
    torch.set_num_threads(threads)
    key = (name, threads, batch)
    if key not in _best_format:
        trial = {}
        for fmt in ("contiguous", "channels_last"):
            s = step_fn(name, batch, fmt)
            for _ in range(3):
                s()
            trial[fmt] = min(timed(s, 2) for _ in range(2))
        _best_format[key] = min(trial, key=trial.get)
    fmt = _best_format[key]
    s = step_fn(name, batch, fmt)
    for _ in range(3):
        s()
    return batch * steps / timed(s, steps), fmt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help="answer requests on stdin (used by train_bench)")
    ap.add_argument("--model", default="fmnist_cnn", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if not a.serve:
        ips, fmt = measure(a.model, a.threads, a.batch, a.steps)
        print(f"{a.model} threads {a.threads} batch {a.batch}: {ips:.0f} images/s ({fmt}, torch {torch.__version__})")
        return
    print(f"ready torch {torch.__version__}", flush=True)
    for line in sys.stdin:
        f = line.split()
        if not f or f[0] == "quit":
            break
        ips, fmt = measure(f[0], int(f[1]), int(f[2]), int(f[3]))
        print(f"ips {ips:.3f} {fmt}", flush=True)


if __name__ == "__main__":
    main()
