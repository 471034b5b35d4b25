#!/usr/bin/env python3
"""PyTorch's torchvision ResNet-50 training throughput on synthetic 224x224 data, channels_last, eager mode,
SGD with momentum, on one GPU: the side-by-side rows of the GPU bundle's run-gpu-checks.sh. Prints images/s
of the last 20 steps (all of them when there are fewer) as its last line.
    torch_resnet50.py --batch 256 --tf32 true
    torch_resnet50.py --batch 256 --amp bf16      # autocast (AMP); fp16 adds the GradScaler, as users run it
    torch_resnet50.py --device cpu --batch 2 --steps 2 --amp bf16   # a smoke test without a GPU"""
import argparse
import time

import torch
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=256)
p.add_argument("--tf32", choices=["true", "false"], default="true")
p.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--device", default="cuda")
a = p.parse_args()
tf32 = a.tf32 == "true"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.backends.cudnn.benchmark = True
dev = torch.device(a.device)
amp_dtype = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.amp]
model = torchvision.models.resnet50(num_classes=1000).to(dev, memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
# Dynamic loss scaling for fp16 only (bf16 has fp32's range), as cnntrain does.
scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "fp16" and dev.type == "cuda")
x = torch.randn(a.batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (a.batch,), device=dev)
loss_fn = torch.nn.CrossEntropyLoss()


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


timed = min(20, a.steps)
for step in range(a.steps):
    if step == a.steps - timed:
        sync()
        t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
sync()
print(f"{timed * a.batch / (time.perf_counter() - t0):.0f}")
