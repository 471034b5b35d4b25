"""torchvision resnet18 and resnet50 state dicts, saved as safetensors, load unchanged into cnntrain's zoo
models of the same names and give PyTorch's evaluation logits: |cnntrain - torch| <= 1e-4 * max|torch| per
model, twice: through --init.from's loader (strictly: every tensor from the file), and through
`cnntrain-data predict SOURCE.safetensors DATA.h5 --model NAME` on a dataset of the same images (uint8,
normalised with the dataset's mean/std as predict does it). resnet18 once more from an ONNX file of the same
weights (--init.from reads its initializers). Also predict's refusals of a safetensors file without --model
and without an input size.

Weights and batch-norm statistics are made non-trivial (random gammas, betas, running means and variances),
so a statistic loaded into the wrong place or a layout left unconverted changes the logits.
usage: torchvision_parity.py INIT_FROM_RUN CNNTRAIN_DATA WORK_DIR (the HDF5 files through Debian's python3
with h5py: tests/finetune/h5_arrays.py)"""
import copy
import os
import warnings
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

run, data_tool, work = sys.argv[1:4]
h5_arrays = [os.environ.get("SYSTEM_PYTHON", "/usr/bin/python3"),
             os.path.join(os.path.dirname(os.path.abspath(__file__)), "h5_arrays.py")]
torch.manual_seed(0)
N, H, W, CLASSES = 2, 64, 64, 1000
# Powers of two for std: the normalisation (u8 - mean) / std is exact, in PyTorch and in cnntrain alike.
MEAN, STD = [120.0, 112.0, 100.0], [64.0, 32.0, 64.0]
images = torch.randint(0, 256, (N, H, W, 3), dtype=torch.uint8)
data = os.path.join(work, "data.h5")
np.save(os.path.join(work, "images.npy"), images.numpy())
subprocess.run(h5_arrays + ["dataset", os.path.join(work, "images.npy"), ",".join(map(str, MEAN)),
                            ",".join(map(str, STD)), data], check=True)
x = ((images.float() - torch.tensor(MEAN)) / torch.tensor(STD)).permute(0, 3, 1, 2).contiguous()


def check(what, got, ref):
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"{what}: max |cnntrain - torch| / max |torch| = {err:.2e} (logits up to {np.abs(ref).max():.3g})")
    if err > 1e-4:
        sys.exit(f"{what}: cnntrain's logits differ from PyTorch's by {err:.2e} relative (limit 1e-4)")


def refused(args, words):
    p = subprocess.run([data_tool, "predict"] + args, capture_output=True, text=True)
    if p.returncode != 2 or not all(w in p.stderr for w in words):
        sys.exit(f"predict {' '.join(args)}: exit {p.returncode}, not 2 naming {words}: {p.stderr.strip()}")
    print(f"predict refuses {os.path.basename(args[0])} {' '.join(args[2:])}: exit 2, {p.stderr.strip()[:100]}...")


for name in ("resnet18", "resnet50"):
    model = getattr(torchvision.models, name)(num_classes=CLASSES)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(1000)
    model.eval()
    with torch.no_grad():
        ref = model(x).numpy()
    files = [os.path.join(work, name + ".safetensors")]
    safetensors_io.save(model.state_dict(), files[0])
    if name == "resnet18":
        # The same weights as ONNX initializers (TorchScript exporter in training mode: batch norm kept, the
        # state dict's names).
        # The export runs the model in training mode: a copy whose batch norms have momentum 0 keeps the
        # running statistics as they are.
        files.append(os.path.join(work, name + ".onnx"))
        twin = copy.deepcopy(model)
        for m in twin.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = 0.0
        with warnings.catch_warnings():  # the legacy exporter's notes (deprecation, num_batches_tracked)
            warnings.simplefilter("ignore")
            torch.onnx.export(twin, x, files[1], dynamo=False, opset_version=17, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
    xin, out = os.path.join(work, name + "_x.bin"), os.path.join(work, name + "_logits.bin")
    x.numpy().astype(np.float32).tofile(xin)
    for weights in files:
        subprocess.run([run, name, weights, xin, str(N), "3", str(H), str(W), str(CLASSES), out], check=True)
        check(f"{name} from {os.path.basename(weights)}", np.fromfile(out, dtype=np.float32).reshape(N, CLASSES), ref)
    pred, npy = os.path.join(work, name + "_pred.h5"), os.path.join(work, name + "_pred.npy")
    subprocess.run([data_tool, "predict", files[0], data, "--model", name, "--out", pred], check=True)
    subprocess.run(h5_arrays + ["logits", pred, npy], check=True)
    check(f"predict {os.path.basename(files[0])} --model {name}", np.load(npy), ref)
weights = os.path.join(work, "resnet18.safetensors")
refused([weights, data, "--out", os.path.join(work, "no.h5")], ["safetensors", "--model"])
os.makedirs(os.path.join(work, "images"))
refused([weights, os.path.join(work, "images"), "--model", "resnet18", "--out", os.path.join(work, "no.h5")],
        ["no input size", "--stats-from"])
refused([weights, data, "--model", "resnet50", "--out", os.path.join(work, "no.h5")], ["does not hold", "resnet50"])
print("torchvision parity: OK")
