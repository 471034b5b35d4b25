"""PyTorch parity of ONNX import (--model FILE.onnx): run in build/pyvenv by `make test-onnx-import`.

usage: import_parity.py ONNX_RUN WORKDIR

Networks built from the ops the importer builds (a plain CNN whose Flatten of a 7x7 map feeds a Linear, so the
weight columns must be reordered; a residual net with fan-out and Add; dropout; every activation,
squeeze-excitation, SiLU and DenseNet-style concatenation; MobileNetV2's inverted residuals (depthwise, ReLU6);
an EfficientNet-style MBConv block (SiLU, 5x5 depthwise with stride 2, squeeze-excitation, HardSwish,
HardSigmoid, a grouped convolution); dilated convolutions and padding='same' with an even kernel (auto_pad
SAME_UPPER, or asymmetric pads); a DenseNet-style net with pre-activation batch norm after concatenations) are
exported by PyTorch's
TorchScript exporter in training mode (BatchNormalization and Dropout kept, opset 17) and by the default
(dynamo) exporter (opset 18+, batch norm folded, external data). For each file, tests/onnx/onnx_run imports it
and compares with PyTorch:
  - evaluation logits within 1e-4 of the largest (relative);
  - one plain SGD step on the mean cross-entropy in training mode (batch statistics): every parameter's update
    within 1% (relative norm) of PyTorch's (files with batch norm kept; dropout 0 there: masks differ).
Convolutions PyTorch does not write (auto_pad with stride 2, SAME_LOWER, explicit asymmetric pads) are built with
onnx.helper and compared with ONNX Runtime; the paddings cnntrain cannot represent must exit 2 naming the node.
float16 and bfloat16 files (16-bit initializers) load and match PyTorch in fp32 (half_files: tolerance there).
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from export_for_training import InvertedResidual  # MobileNetV2's block, as the training test's net

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


class MobileNetStyle(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(InvertedResidual(8, 8, 1, 3), InvertedResidual(8, 12, 2, 4),
                                    InvertedResidual(12, 12, 1, 4))
        self.drop, self.fc = nn.Dropout(0.0), nn.Linear(12, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(self.drop(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


class EfficientNetStyle(nn.Module):
    """An MBConv block (SiLU as Sigmoid * x, 5x5 depthwise, squeeze-excitation scaling), HardSwish and
    HardSigmoid, a grouped (not depthwise) convolution."""
    def __init__(self):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.expand, self.bn1 = nn.Conv2d(8, 24, 1, bias=False), nn.BatchNorm2d(24)
        self.dw, self.bn2 = nn.Conv2d(24, 24, 5, 2, 2, groups=24, bias=False), nn.BatchNorm2d(24)
        self.fc1, self.fc2 = nn.Conv2d(24, 6, 1), nn.Conv2d(6, 24, 1)
        self.project, self.bn3 = nn.Conv2d(24, 16, 1, bias=False), nn.BatchNorm2d(16)
        self.grouped = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.silu(self.bn0(self.stem(x)))
        x = F.silu(self.bn2(self.dw(F.silu(self.bn1(self.expand(x))))))
        s = F.adaptive_avg_pool2d(x, 1)
        x = x * F.hardsigmoid(self.fc2(F.silu(self.fc1(s))))
        x = self.bn3(self.project(x))
        x = F.hardswish(self.grouped(x)) + x
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DilatedSame(nn.Module):
    """Dilated convolutions and padding='same' with an even kernel: the TorchScript exporter writes auto_pad
    SAME_UPPER, the default exporter pads [1,1,2,2] (one more after than before)."""
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 4, padding="same")
        self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
        self.c3 = nn.Conv2d(8, 12, 3, stride=2, padding=3, dilation=3)
        self.fc = nn.Linear(12 * 14 * 14, 10)

    def forward(self, x):
        x = F.relu(self.c2(F.relu(self.c1(x))))
        return self.fc(torch.flatten(F.relu(self.c3(x)), 1))


class DenseNetStyle(nn.Module):
    """Dense layers of pre-activation batch norm (following a concatenation, no convolution), ReLU, 1x1 and 3x3
    convolutions, concatenated; a transition (batch norm, ReLU, 1x1, average pooling)."""
    def __init__(self, growth=6):
        super().__init__()
        self.conv0 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.layers = nn.ModuleList()
        c = 8
        for _ in range(3):
            self.layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 12, 1, bias=False),
                                             nn.BatchNorm2d(12), nn.ReLU(), nn.Conv2d(12, growth, 3, padding=1,
                                                                                      bias=False)))
            c += growth
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 12, 1, bias=False), nn.AvgPool2d(2))
        self.norm5, self.fc = nn.BatchNorm2d(12), nn.Linear(12, 10)

    def forward(self, x):
        x = self.conv0(x)
        for layer in self.layers:
            x = torch.cat([x, layer(x)], 1)
        x = F.relu(self.norm5(self.trans(x)))
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


def conv_file(path, k, stride, dilation, auto_pad=None, pads=None):
    """Conv (4 filters, k x k) -> Flatten -> Gemm (10) on 1x28x28, written with onnx.helper (auto_pad with any
    stride, SAME_LOWER, explicit pads: what PyTorch does not write). ONNX Runtime, the reference here, refuses
    auto_pad SAME with dilation, so the dilated SAME case is PyTorch's (DilatedSame)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    span = dilation * (k - 1) + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        p = -(-28 // stride)
    else:
        before, after = (pads[0], pads[2]) if pads else (0, 0)
        p = (28 + before + after - span) // stride + 1
    rng = np.random.default_rng(k * 100 + stride * 10 + dilation)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (4, 1, k, k)).astype(np.float32), "conv.weight")
    g = numpy_helper.from_array(rng.uniform(-0.1, 0.1, (10, 4 * p * p)).astype(np.float32), "fc.weight")
    attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "dilations": [dilation, dilation]}
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    if pads:
        attrs["pads"] = pads
    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv", **attrs),
             helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc.weight"], ["logits"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], [w, g])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def padding_files(x):
    """auto_pad and explicit pads against ONNX Runtime; the paddings cnntrain cannot represent exit 2 naming the
    node (more padding before the input than after it)."""
    import onnxruntime as ort
    cases = [("same-upper-s2", 3, 2, 1, "SAME_UPPER", None), ("same-upper-k4", 4, 1, 1, "SAME_UPPER", None),
             ("same-lower-even", 3, 1, 1, "SAME_LOWER", None), ("valid-s2", 3, 2, 1, "VALID", None),
             ("pads-asym", 3, 2, 2, None, [1, 1, 2, 3])]
    for tag, k, s, d, auto_pad, pads in cases:
        path = f"{WORK}/{tag}.onnx"
        conv_file(path, k, s, d, auto_pad, pads)
        want = ort.InferenceSession(path).run(None, {"x": x.numpy()})[0]
        got = run_tool(path, x, f"{WORK}/{tag}")
        err = np.abs(got - want).max() / np.abs(want).max()
        check(err <= 1e-4, f"{tag}: logits within {err:.1e} of ONNX Runtime's (<= 1e-4)")
    refused = [("same-lower-s2", 3, 2, 1, "SAME_LOWER", None, "(from auto_pad SAME_LOWER)"),
               ("pads-before", 3, 1, 1, None, [2, 2, 1, 1], "pads [2,2,1,1]: more padding before the input"),
               ("pads-rows-cols", 3, 1, 1, None, [1, 0, 1, 0], "the same padding before the rows and before")]
    for tag, k, s, d, auto_pad, pads, needle in refused:
        path = f"{WORK}/{tag}.onnx"
        conv_file(path, k, s, d, auto_pad, pads)
        x.numpy().astype(np.float32).tofile(f"{WORK}/x.bin")
        r = subprocess.run([TOOL, path, f"{WORK}/x.bin", "6", "1", "28", "28", "10", WORK], capture_output=True,
                           text=True)
        check(r.returncode == 2 and "node 'conv' (Conv)" in r.stderr and needle in r.stderr,
              f"{tag}: exit 2 naming the node and '{needle}' (got {r.returncode}: {r.stderr.strip()})")


def half_files(x):
    """A MobileNetV2-style net exported in float16 and bfloat16 (eval mode: the exporter folds batch norm into the
    convolutions in that type). cnntrain reads the 16-bit initializers as float32 and computes in float32; the
    reference is PyTorch in float32 with the same 16-bit weights. They differ by one rounding of each folded
    weight to 16 bits (unit roundoff u: 2^-11 for float16, 2^-8 for bfloat16), which moves the logits by a few u
    through the net's 10 layers: tolerance 4u (2e-3, 1.6e-2; measured 1.9e-4 and 1.7e-3)."""
    for dt, tol in ((torch.float16, 4 * 2.0 ** -11), (torch.bfloat16, 4 * 2.0 ** -8)):
        torch.manual_seed(1)
        m = MobileNetStyle()
        randomise_bn(m, 2)
        m.eval().to(dt)
        tag = f"mobilenet-{str(dt).split('.')[1]}"
        path = f"{WORK}/{tag}.onnx"
        torch.onnx.export(m, (x.to(dt),), path, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        with torch.no_grad():
            want = m.float()(x).numpy()
        got = run_tool(path, x, f"{WORK}/{tag}")
        err = np.abs(got - want).max() / np.abs(want).max()
        check(err <= tol, f"{tag}.onnx: evaluation logits within {err:.1e} of PyTorch's fp32 (<= {tol:.1e})")


def main():
    torch.manual_seed(0)
    x = torch.randn(6, 1, 28, 28)
    y = torch.tensor([3, 1, 4, 1, 5, 9])
    nets = [("plain", lambda: Plain(0.25), {"fc1.weight": (12, 7, 7)}),
            ("plain-nodrop", lambda: Plain(0.0), {"fc1.weight": (12, 7, 7)}),
            ("residual", Residual, {}),
            ("mixed", Mixed, {}),
            ("mobilenet", MobileNetStyle, {}),
            ("efficientnet", EfficientNetStyle, {}),
            ("dilated", DilatedSame, {"fc.weight": (12, 14, 14)}),
            ("densenet", DenseNetStyle, {})]
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
    padding_files(x)
    half_files(x)
    if failures:
        sys.exit(f"{len(failures)} failure(s)")


main()
