"""torchvision resnet18 and resnet50 state dicts, saved as safetensors, load unchanged into cnntrain's zoo
models of the same names (--init.from's loader, strictly: every tensor from the file) and give PyTorch's
evaluation logits: |cnntrain - torch| <= 1e-4 * max|torch| per model. resnet18 once more from an ONNX file
of the same weights (--init.from reads its initializers).

Weights and batch-norm statistics are made non-trivial (random gammas, betas, running means and variances),
so a statistic loaded into the wrong place or a layout left unconverted changes the logits.
usage: torchvision_parity.py INIT_FROM_RUN WORK_DIR"""
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

run, work = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
N, H, W, CLASSES = 2, 64, 64, 1000
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
    x = torch.rand(N, 3, H, W) * 2 - 1
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
        got = np.fromfile(out, dtype=np.float32).reshape(N, CLASSES)
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        what = f"{name} from {os.path.basename(weights)}"
        print(f"{what}: max |cnntrain - torch| / max |torch| = {err:.2e} (logits up to {np.abs(ref).max():.3g})")
        if err > 1e-4:
            sys.exit(f"{what}: cnntrain's logits differ from PyTorch's by {err:.2e} relative (limit 1e-4)")
print("torchvision parity: OK")
