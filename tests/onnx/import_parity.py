"""PyTorch parity of ONNX import (--model FILE.onnx): run in build/pyvenv by `make test-onnx-import`.

usage: import_parity.py ONNX_RUN WORKDIR

Networks built from the ops the importer builds (a plain CNN whose Flatten of a 7x7 map feeds a Linear, so the
weight columns must be reordered; a residual net with fan-out and Add; dropout; every activation,
squeeze-excitation, SiLU and DenseNet-style concatenation) are exported by PyTorch's
TorchScript exporter in training mode (BatchNormalization and Dropout kept, opset 17) and by the default
(dynamo) exporter (opset 18+, batch norm folded, external data). For each file, tests/onnx/onnx_run imports it
and compares with PyTorch:
  - evaluation logits within 1e-4 of the largest (relative);
  - one plain SGD step on the mean cross-entropy in training mode (batch statistics): every parameter's update
    within 1% (relative norm) of PyTorch's (files with batch norm kept; dropout 0 there: masks differ).
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TOOL, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what)
    if not ok:
        failures.append(what)


class Plain(nn.Module):
    def __init__(self, p_drop):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 12, 3, padding=1), nn.BatchNorm2d(12)
        self.drop = nn.Dropout(p_drop)
        self.fc1, self.fc2 = nn.Linear(12 * 7 * 7, 32), nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(F.relu(self.fc1(x)))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c1, self.b1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn0(self.stem(x)))
        x = F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)
        x = F.relu(self.down(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Mixed(nn.Module):
    """Every activation, squeeze-excitation (GlobalAveragePool, Sigmoid, broadcast Mul), SiLU (Sigmoid * x),
    and a DenseNet-style channel concatenation."""
    def __init__(self):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.se1, self.se2 = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 8, 1)
        self.d1 = nn.Conv2d(8, 6, 3, padding=1)
        self.d2 = nn.Conv2d(14, 6, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(20)
        self.fc = nn.Linear(20, 10)

    def forward(self, x):
        x = F.relu6(self.bn0(self.stem(x)))
        s = torch.sigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(x, 1)))))
        x = F.hardswish(x * s)
        y1 = F.leaky_relu(self.d1(x), 0.1)
        x = torch.cat([x, y1], 1)
        y2 = F.silu(self.d2(x))
        x = F.hardsigmoid(self.bn1(torch.cat([x, y2], 1)))
        x = F.max_pool2d(x, 2)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def randomise_bn(m, seed):
    g = torch.Generator().manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.weight.data = 0.5 + torch.rand(mod.weight.shape, generator=g)
            mod.bias.data = 0.2 * torch.randn(mod.bias.shape, generator=g)
            mod.running_mean.data = 0.1 * torch.randn(mod.running_mean.shape, generator=g)
            mod.running_var.data = 0.5 + torch.rand(mod.running_var.shape, generator=g)


def export(m, x, path, dynamo):
    if dynamo:
        m.eval()
        torch.onnx.export(m, (x,), path, external_data=True, dynamic_shapes=({0: torch.export.Dim("N")},))
    else:
        torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def run_tool(path, x, out, lr=None, y=None):
    os.makedirs(out, exist_ok=True)
    x.numpy().astype(np.float32).tofile(f"{out}/x.bin")
    n, c, h, w = x.shape
    cmd = [TOOL, path, f"{out}/x.bin", str(n), str(c), str(h), str(w), "10", out]
    if lr is not None:
        y.numpy().astype(np.int32).tofile(f"{out}/y.bin")
        cmd += [str(lr), f"{out}/y.bin"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"onnx_run {path} failed ({r.returncode}): {r.stderr}")
    return np.fromfile(f"{out}/logits.bin", dtype=np.float32).reshape(n, 10)


def ours_layout(name, t, flattened):
    """A PyTorch tensor in cnntrain's layout: OIHW -> KRSC; a Linear after a flattened C,H,W map: columns H,W,C."""
    t = t.detach().numpy()
    if t.ndim == 4:
        return t.transpose(0, 2, 3, 1).reshape(-1)
    if name in flattened:
        c, h, w = flattened[name]
        return t.reshape(t.shape[0], c, h, w).transpose(0, 2, 3, 1).reshape(-1)
    return t.reshape(-1)


def sgd_step_parity(m, path, x, y, flattened, tag):
    lr = 0.1
    m.train()
    before = {k: v.detach().clone() for k, v in m.named_parameters()}
    m.zero_grad()
    F.cross_entropy(m(x), y).backward()
    out = f"{WORK}/{tag}-step"
    run_tool(path, x, out, lr, y)
    ours = np.fromfile(f"{out}/params.bin", dtype=np.float32)
    at = 0
    worst = 0.0
    for line in open(f"{out}/params.txt"):
        name, size = line.split()[0], int(line.split()[1])
        p = dict(m.named_parameters())[name]
        want = ours_layout(name, before[name] - lr * p.grad, flattened) - ours_layout(name, before[name], flattened)
        got = ours[at:at + size].astype(np.float64) - ours_layout(name, before[name], flattened)
        at += size
        # A conv bias before a training-mode batch norm has a zero gradient (the norm removes the mean): both
        # updates are rounding noise, measured against an absolute floor instead.
        rel = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-6)
        worst = max(worst, rel)
        if rel > 0.01:
            check(False, f"{tag}: update of {name} differs from PyTorch's by {rel:.2e} (relative norm)")
    check(at == ours.size, f"{tag}: params.txt covers all {ours.size} parameter values")
    check(worst <= 0.01, f"{tag}: one SGD step, every parameter's update within 1% of PyTorch's (worst {worst:.1e})")


def main():
    torch.manual_seed(0)
    x = torch.randn(6, 1, 28, 28)
    y = torch.tensor([3, 1, 4, 1, 5, 9])
    nets = [("plain", lambda: Plain(0.25), {"fc1.weight": (12, 7, 7)}),
            ("plain-nodrop", lambda: Plain(0.0), {"fc1.weight": (12, 7, 7)}),
            ("residual", Residual, {}),
            ("mixed", Mixed, {})]
    for tag, make, flattened in nets:
        for dynamo in (False, True):
            torch.manual_seed(1)
            m = make()
            randomise_bn(m, 2)
            path = f"{WORK}/{tag}-{'dynamo' if dynamo else 'torchscript'}.onnx"
            export(m, x, path, dynamo)
            m.eval()
            with torch.no_grad():
                want = m(x).numpy()
            got = run_tool(path, x, f"{WORK}/{tag}-{dynamo}")
            err = np.abs(got - want).max() / np.abs(want).max()
            check(err <= 1e-4, f"{os.path.basename(path)}: evaluation logits within {err:.1e} of PyTorch's (<= 1e-4)")
            if not dynamo and tag != "plain":
                sgd_step_parity(m, path, x, y, flattened, os.path.basename(path))
    if failures:
        sys.exit(f"{len(failures)} failure(s)")


main()
