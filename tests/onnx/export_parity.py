"""ONNX export against ONNX Runtime: run in build/pyvenv by `make test-onnx-export`.

usage: export_parity.py BUILD WORKDIR

Zoo models (lenet5, fmnist_cnn, resnet20 with its zero-padding shortcuts, fmnist_resnet with projection
shortcuts: the fused batch norm + ReLU and residual-join blocks; efficientnet_b0: grouped convolutions, SiLU,
squeeze-excitation, and the residual joins with stochastic depth, trained with it and exported as the plain add
of inference) and an imported graph (a PyTorch network with
batch norm, dropout, an SE block's Mul, a Concat, LeakyRelu/Clip/HardSwish/SiLU-style activations, average and
max pooling and a Flatten into a Linear; round trip: import -> train -> checkpoint -> export) train a few steps
on synthetic data (fmnist_cnn on Fashion-MNIST); each checkpoint is exported with `cnntrain-data export
--format onnx` and the file must
  - pass onnx.checker with full_check (shape inference included), opset 17, a dynamic batch dimension,
    initializers named after the checkpoint's parameters and buffers, metadata (input_size, model, step;
    fmnist_cnn's also the mean, std and class names of its training set);
  - give in ONNX Runtime the logits cnntrain computes (tests/onnx/ckpt_logits) within 1e-4 relative (to the
    largest logit), for a batch of 3 random images.
fmnist_cnn is also exported with --weights ema from a --train.ema run. Then the exits: a bad --format (2), a missing checkpoint (4), --weights ema of a run without EMA (4).
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

BUILD, WORK = sys.argv[1], sys.argv[2]
TRAIN, DATA = f"{BUILD}/cnntrain", f"{BUILD}/cnntrain-data"
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(args, want=0):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != want:
        print(p.stdout[-3000:], p.stderr[-3000:])
    return p


def train(name, model, data, extra=()):
    """data: a synthetic spec NxHxWxC:CLASSES, or an HDF5 training set."""
    run_dir = f"{WORK}/{name}"
    source = ["--data.train", data] if data.endswith(".h5") else ["--data.synthetic", data]
    p = run([TRAIN, "--model", model, *source, "--data.test", "", "--train.batch", "8",
             "--train.max_steps", "3", "--train.lr", "0.05", "--log.every_steps", "1", "--threads", "2",
             "--log.tensorboard", "false", "--run-dir", run_dir, *extra])
    check(p.returncode == 0, f"{name}: 3 training steps")
    cks = sorted(os.listdir(f"{run_dir}/checkpoints"))
    return f"{run_dir}/checkpoints/{cks[-1]}"


class Imported(nn.Module):
    """The importer's ops: BN, SE (Mul), Concat, activations, pools, dropout, Flatten of a map into a Linear."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.se1, self.se2 = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 8, 1)
        self.conv3, self.bn3 = nn.Conv2d(16, 12, 3, padding=1), nn.BatchNorm2d(12)
        self.drop = nn.Dropout(0.2)
        self.fc1, self.fc2 = nn.Linear(12 * 7 * 7, 24), nn.Linear(24, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        y = F.leaky_relu(self.conv2(x), 0.1)
        s = torch.sigmoid(self.se2(F.relu6(self.se1(F.adaptive_avg_pool2d(y, 1)))))
        x = torch.cat([x, y * s], 1)
        x = F.avg_pool2d(F.hardswish(self.bn3(self.conv3(x))), 2)
        x = self.drop(torch.flatten(x, 1))
        return self.fc2(F.silu(self.fc1(x)))


def export_imported(path):
    torch.manual_seed(0)
    torch.onnx.export(Imported(), (torch.randn(2, 1, 28, 28),), path, dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "N"}})


def compare(name, ckpt, chw, stats=False, weights="raw"):
    out = f"{WORK}/{name}.onnx"
    p = run([DATA, "export", ckpt, "--format", "onnx", "--weights", weights, "--out", out])
    check(p.returncode == 0 and "ONNX opset 17" in p.stdout, f"{name}: export --format onnx: {p.stdout.strip()}")
    if p.returncode:
        return
    m = onnx.load(out)
    try:
        onnx.checker.check_model(m, full_check=True)
        check(True, f"{name}: onnx.checker (full check) passes")
    except Exception as e:  # noqa: BLE001: report the checker's reason
        check(False, f"{name}: onnx.checker: {e}")
    check(m.opset_import[0].version == 17, f"{name}: opset 17")
    check(m.graph.input[0].type.tensor_type.shape.dim[0].dim_param != "", f"{name}: dynamic batch dimension")
    # h5py is Debian's (the venv has PyTorch and ONNX only).
    names = set(subprocess.run(["/usr/bin/python3", "-c", "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); "
                                "print('\\n'.join(list(f['params']) + list(f.get('buffers', []))))", ckpt],
                               capture_output=True, text=True, check=True).stdout.split())
    inits = {t.name for t in m.graph.initializer}
    check(names <= inits, f"{name}: initializers named after the parameters and buffers ({len(names)})")
    props = {p.key: p.value for p in m.metadata_props}
    check(props.get("input_size") == "%dx%dx%d" % (chw[1], chw[2], chw[0]) and "step" in props and
          (not stats or len(props.get("mean", "").split(",")) == chw[0] == len(props.get("std", "").split(",")) and
           len(props.get("class_names", "").split(",")) == 10),
          f"{name}: metadata {props}")
    x = np.random.default_rng(7).uniform(-1, 1, (3, *chw)).astype(np.float32)
    x.tofile(f"{WORK}/{name}.in")
    p = run([f"{BUILD}/tests/ckpt_logits", ckpt, weights, f"{WORK}/{name}.in", "3", f"{WORK}/{name}.out"])
    ours = np.fromfile(f"{WORK}/{name}.out", dtype=np.float32).reshape(3, -1)
    theirs = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    err = np.abs(ours - theirs).max() / max(np.abs(ours).max(), 1e-6)
    check(p.returncode == 0 and ours.shape == theirs.shape and err <= 1e-4,
          f"{name}: ONNX Runtime's logits equal cnntrain's (relative error {err:.2e})")


def main():
    for name, model, spec, chw in (("lenet5", "lenet5", "64x28x28x1:10", (1, 28, 28)),
                                   ("fmnist_cnn", "fmnist_cnn", "data/fashion_mnist/train.h5", (1, 28, 28)),
                                   ("resnet20", "resnet20", "64x32x32x3:10", (3, 32, 32)),
                                   ("fmnist_resnet", "fmnist_resnet", "64x28x28x1:10", (1, 28, 28)),
                                   ("efficientnet_b0", "efficientnet_b0", "64x32x32x3:10", (3, 32, 32))):
        # The training set's mean and std reach the metadata (a synthetic set has none).
        compare(name, train(name, model, spec), chw, stats=spec.endswith(".h5"))
    # --weights ema: the moving average under the parameters' names (cnntrain's logits with the same weights).
    compare("fmnist_cnn_ema", train("fmnist_cnn_ema", "fmnist_cnn", "64x28x28x1:10", ["--train.ema", "0.9"]),
            (1, 28, 28), weights="ema")
    export_imported(f"{WORK}/imported_src.onnx")
    ckpt = train("imported", f"{WORK}/imported_src.onnx", "64x28x28x1:10")
    os.remove(f"{WORK}/imported_src.onnx")  # the export needs the checkpoint only (its stored graph)
    compare("imported", ckpt, (1, 28, 28))

    p = run([DATA, "export", ckpt, "--format", "tflite", "--out", f"{WORK}/x.onnx"], want=2)
    check(p.returncode == 2 and "--format must be hdf5 or onnx" in p.stderr, "a bad --format exits 2")
    p = run([DATA, "export", f"{WORK}/none.h5", "--format", "onnx", "--out", f"{WORK}/y.onnx"], want=4)
    check(p.returncode == 4 and "none.h5" in p.stderr, "a missing checkpoint exits 4")
    p = run([DATA, "export", ckpt, "--format", "onnx", "--weights", "ema", "--out", f"{WORK}/z.onnx"], want=4)
    check(p.returncode == 4 and "--train.ema" in p.stderr, "--weights ema of a run without EMA exits 4")
    check(not os.path.exists(f"{WORK}/y.onnx") and not os.path.exists(f"{WORK}/z.onnx"), "failed exports write nothing")
    if failures:
        sys.exit("export_parity: %d failure(s):\n  %s" % (len(failures), "\n  ".join(failures)))
    print("export_parity: every exported model passes the checker and matches cnntrain in ONNX Runtime")


main()
