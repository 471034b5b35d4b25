#!/usr/bin/python3
"""PyTorch CPU training-step images/s in fp32 and under torch.autocast("cpu", torch.bfloat16), for the
precision benchmark (tests/bench/precision_bench.sh, `make bench-precision`). The networks are the zoo's
(torch_zoo.py); channels_last, SGD with momentum, synthetic data; the median of the timed repetitions.
  /usr/bin/python3 tests/bench/torch_amp_bench.py --model resnet20 --batch 128 --threads 2 --precision bf16
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn

from torch_zoo import ZOO

SHAPES = {"resnet20": (3, 32, 32, 10), "resnet50": (3, 224, 224, 10)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c, h, w, classes = SHAPES[a.model]
    torch.manual_seed(0)
    model = ZOO[a.model](c, classes, h).to(memory_format=torch.channels_last)
    x = (torch.rand(a.batch, c, h, w) * 2 - 1).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (a.batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    step()  # warm-up
    rates = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        rates.append(a.batch * a.steps / (time.perf_counter() - t0))
    print("%.1f" % statistics.median(rates))


if __name__ == "__main__":
    main()
