#!/usr/bin/python3
"""Rotation and colour jitter against torchvision: reads augment_dump's JSON (stdin) and applies
torchvision.transforms.functional.rotate (bilinear, zero outside: fill None), adjust_brightness,
adjust_contrast and adjust_saturation, in that order, with each sample's drawn parameters to the same image
(float, 0..1), then compares with cnntrain's result in 0..255 units. The tolerance covers float32 rounding and
the red weight of the grey level (torchvision 0.2989, cnntrain 0.299: at most 0.03 grey levels); a wrong
direction, centre, interpolation or blend is off by whole grey levels."""
import json
import sys

import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

TOL = 0.1  # grey levels
images = json.load(sys.stdin)
worst, count = 0.0, 0
for im in images:
    h, w, c = im["h"], im["w"], im["c"]
    img = torch.tensor(im["pixels"], dtype=torch.float32).reshape(h, w, c).permute(2, 0, 1) / 255
    for k, s in enumerate(im["samples"]):
        t = F.rotate(img, s["degrees"], InterpolationMode.BILINEAR)
        t = F.adjust_brightness(t, s["brightness"])
        t = F.adjust_contrast(t, s["contrast"])
        t = F.adjust_saturation(t, s["saturation"])
        want = (t * 255).permute(1, 2, 0).reshape(-1).double()
        got = torch.tensor(s["out"], dtype=torch.float64)
        err = (got - want).abs().max().item()
        if err > TOL:
            i = int((got - want).abs().argmax())
            sys.exit(f"FAIL: {h}x{w}x{c} sample {k} ({s}): element {i} is {got[i]:.4f}, torchvision "
                     f"{want[i]:.4f} (max error {err:.4f} grey levels > {TOL})"[:2000])
        worst, count = max(worst, err), count + 1
print(f"ok: rotation and colour jitter of {count} samples within {worst:.4f} grey levels of torchvision")
