#!/usr/bin/env python3
"""PyTorch's torchvision ResNet-50 training throughput on synthetic 224x224 data, channels_last, eager mode,
SGD with momentum, on one GPU: the side-by-side row of the GPU bundle's run-gpu-checks.sh. Prints images/s
of the last 20 of 30 steps as its last line.
    torch_resnet50.py --batch 256 --tf32 true"""
import argparse
import time

import torch
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=256)
p.add_argument("--tf32", choices=["true", "false"], default="true")
p.add_argument("--steps", type=int, default=30)
a = p.parse_args()
tf32 = a.tf32 == "true"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
model = torchvision.models.resnet50(num_classes=1000).to(dev, memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
x = torch.randn(a.batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (a.batch,), device=dev)
loss_fn = torch.nn.CrossEntropyLoss()
warm = a.steps - 20
for step in range(a.steps):
    if step == warm:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss_fn(model(x), y).backward()
    opt.step()
torch.cuda.synchronize()
print(f"{20 * a.batch / (time.perf_counter() - t0):.0f}")
