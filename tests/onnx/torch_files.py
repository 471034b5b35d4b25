"""ONNX files from PyTorch's exporters, read by read_onnx (tests/onnx/onnx_tool) and by the onnx package.

usage: torch_files.py ONNX_TOOL WORKDIR   (run in build/pyvenv: make test-onnx-torch)

A small network with every supported op family (depthwise conv + batch norm + ReLU6, squeeze-excitation,
SiLU, concat, pooling, hard activations, dropout, linear) goes through the default (dynamo) exporter (opset 18+,
weights as external data), the TorchScript exporter in training mode (opset 17, BatchNormalization and Dropout
kept) and in eval mode (opset 13). For each file: the nodes (op types, order, wiring), initializers and
constants (names, shapes, every value) that read_onnx gives must equal what onnx.load gives; the file that
write_onnx writes back must pass onnx.checker (full check) and give ONNX Runtime the same logits as the
original. Then the refusals: an op outside the table (Resize), a missing and a truncated external-data file,
a truncated model; each must exit 2 naming what is wrong.
"""
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

TOOL, WORK = sys.argv[1], sys.argv[2]
failures = []
# The TorchScript exporter is deprecated and says so at every call; what it writes is what is tested here.
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 2, 1), nn.Conv2d(c // 2, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))


class Net(nn.Module):
    def __init__(self, resize=False):
        super().__init__()
        self.resize = resize
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8),
                                nn.Hardswish())
        self.se = SE(8)
        self.branch = nn.Conv2d(8, 4, 1)
        self.pre_bn = nn.BatchNorm2d(12)
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(12 * (8 if resize else 4) ** 2, 10))

    def forward(self, x):
        y = self.dw(self.stem(x))
        y = self.se(y) + y
        y = F.silu(y)
        y = torch.cat([y, self.branch(y)], 1)
        if self.resize:
            y = F.interpolate(y, scale_factor=2.0)
        y = F.max_pool2d(F.leaky_relu(self.pre_bn(y), 0.1), 2)
        y = F.avg_pool2d(F.hardsigmoid(y), 2)
        return self.head(torch.flatten(y, 1))


def tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True)


def read_ours(path, any_op=True):
    out = os.path.join(WORK, "dump.json")
    r = tool("dump", path, out, *(["--any-op"] if any_op else []))
    check(r.returncode == 0, f"{path}: onnx_tool dump exited {r.returncode}: {r.stderr.strip()}")
    with open(out) as f:
        return json.load(f)


def compare(path, ours):
    """read_onnx's view against onnx.load's (which also reads the external data)."""
    m = onnx.load(path)
    opset = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")][0]
    check(ours["opset"] == opset, f"{path}: opset {ours['opset']} != {opset}")
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in m.graph.node
              if n.op_type == "Constant" and n.attribute[0].name == "value"}
    theirs = [n for n in m.graph.node if n.op_type != "Constant"]
    check(sorted(n["op"] for n in ours["nodes"]) == sorted(n.op_type for n in theirs),
          f"{path}: node op types differ")
    check([n["name"] for n in ours["nodes"]] == [n.name for n in theirs],
          f"{path}: node order differs from the file's (already topological)")
    for a, b in zip(ours["nodes"], theirs):
        check(a["inputs"] == list(b.input) and a["outputs"] == list(b.output), f"{path}: node {b.name}: wiring")
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    check(sorted(ours["initializers"]) == sorted(inits), f"{path}: initializer names differ")
    for group, ref in (("initializers", inits), ("constants", consts)):
        for name, arr in ref.items():
            t = ours[group].get(name)
            if t is None:
                check(False, f"{path}: {group} '{name}' missing")
                continue
            check(list(arr.shape) == t["dims"], f"{path}: {name}: dims {t['dims']} != {list(arr.shape)}")
            want = arr.astype(np.float32 if arr.dtype.kind == "f" else np.int64).ravel()
            got = np.array(t["values"], dtype=want.dtype)
            check(got.shape == want.shape and np.array_equal(got, want), f"{path}: {name}: values differ")
    init_names = set(inits)
    check([i["name"] for i in ours["inputs"]] == [i.name for i in m.graph.input if i.name not in init_names],
          f"{path}: graph inputs differ")
    check([o["name"] for o in ours["outputs"]] == [o.name for o in m.graph.output], f"{path}: outputs differ")
    params = sum(a.size for a in inits.values() if a.dtype.kind == "f")
    check(f"parameters: {params} " in ours["info"], f"{path}: parameter count {params} not in: {ours['info']}")
    return m


def logits(path, x):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def expect_refusal(args, words, what):
    r = tool(*args)
    check(r.returncode == 2, f"{what}: exit {r.returncode}, expected 2 ({r.stderr.strip()})")
    for w in words:
        check(w in r.stderr, f"{what}: '{w}' not in: {r.stderr.strip()}")


def main():
    torch.manual_seed(1)
    net, x = Net(), torch.rand(2, 3, 16, 16) * 2 - 1
    net.train()(x)  # running statistics that are not the initial ones
    files = {}
    files["dynamo"] = os.path.join(WORK, "dynamo.onnx")
    torch.onnx.export(net.eval(), (x,), files["dynamo"], external_data=True, verbose=False)
    files["ts_train"] = os.path.join(WORK, "ts_train.onnx")
    torch.onnx.export(net, (x,), files["ts_train"], dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes={"input": {0: "N"}}, input_names=["input"])
    files["ts_eval13"] = os.path.join(WORK, "ts_eval13.onnx")
    torch.onnx.export(net.eval(), (x,), files["ts_eval13"], dynamo=False, opset_version=13,
                      do_constant_folding=False, input_names=["input"], dynamic_axes={"input": {0: "N"}})
    check(os.path.exists(files["dynamo"] + ".data"), "the default exporter wrote no external data file")
    for kind, path in files.items():
        ours = read_ours(path)
        m = compare(path, ours)
        ops = sorted({n["op"] for n in ours["nodes"]})
        print(f"{kind}: opset {ours['opset']}, {len(ours['nodes'])} nodes + {len(ours['constants'])} constants, "
              f"{len(ours['initializers'])} initializers; ops {' '.join(ops)}")
        if kind == "ts_train":
            check("BatchNormalization" in ops and "Dropout" in ops, "training-mode export lost BN or Dropout")
        read_ours(path, any_op=False)  # every op the exporters wrote here is in the supported table
    x_np = x.numpy()
    for kind in ("ts_train", "ts_eval13"):
        out = os.path.join(WORK, kind + "_rewritten.onnx")
        r = tool("rewrite", files[kind], out)
        check(r.returncode == 0, f"rewrite {kind}: {r.stderr.strip()}")
        onnx.checker.check_model(onnx.load(out), full_check=True)
        ref = logits(files["ts_eval13"], x_np)
        if kind == "ts_eval13":
            got = logits(out, x_np)
            check(np.allclose(got, ref, rtol=1e-5, atol=1e-6), f"rewritten {kind}: ONNX Runtime logits differ")
        print(f"{kind}: written back by write_onnx, onnx.checker (full) passes")

    resize = os.path.join(WORK, "resize.onnx")
    torch.onnx.export(Net(resize=True).eval(), (x,), resize, dynamo=False, opset_version=17)
    expect_refusal(["dump", resize, os.path.join(WORK, "r.json")], ["(Resize): op type not supported", "Conv",
                                                                      "HardSwish"], "Resize")
    data = files["dynamo"] + ".data"
    shutil.copy(data, data + ".orig")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    expect_refusal(["dump", files["dynamo"], os.path.join(WORK, "t.json")], ["too short", "dynamo.onnx.data"],
                   "truncated external data")
    os.remove(data)
    expect_refusal(["dump", files["dynamo"], os.path.join(WORK, "t.json")], ["is missing", "dynamo.onnx.data"],
                   "missing external data")
    shutil.move(data + ".orig", data)
    cut = os.path.join(WORK, "cut.onnx")
    with open(files["ts_train"], "rb") as f:
        blob = f.read()
    with open(cut, "wb") as f:
        f.write(blob[: len(blob) // 3])
    expect_refusal(["dump", cut, os.path.join(WORK, "c.json")], ["not an ONNX model, or truncated"], "truncated")
    if failures:
        print(f"torch_files: {len(failures)} FAILED checks")
        sys.exit(1)
    print("torch_files: OK")


main()
