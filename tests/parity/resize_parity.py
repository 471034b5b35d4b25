#!/usr/bin/python3
"""Resize and crop against torchvision: reads resize_dump's JSON (stdin) and applies, with each sample's box,
torchvision.transforms.functional.resized_crop (bilinear, antialias=True) and hflip for training samples, and
resize(test_resize or round(max(H, W) / 0.875), antialias=True) + center_crop for the evaluation plan, to the
same uint8 image, then compares with cnntrain's uint8 result. torchvision resamples in float32 and rounds
half to even, as cnntrain does, but sums in another order (both passes over whole images): a sum within float
rounding of a half may round the other way, so one grey level off is allowed in at most 1% of the values.
A wrong box, filter width, centre or clipping is off by many levels in many values."""
import json
import sys

import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

BILINEAR = InterpolationMode.BILINEAR
images = json.load(sys.stdin)
count, off, total = 0, 0, 0
for im in images:
    h, w, c, oh, ow = im["h"], im["w"], im["c"], im["oh"], im["ow"]
    img = torch.tensor(im["pixels"], dtype=torch.uint8).reshape(h, w, c).permute(2, 0, 1)
    for k, s in enumerate(im["samples"]):
        if s["train"]:
            t = F.resized_crop(img, s["top"], s["left"], s["height"], s["width"], [oh, ow], BILINEAR,
                               antialias=True)
            if s["flip"]:
                t = F.hflip(t)
        else:
            size = s["resize"] or round(max(oh, ow) / 0.875)
            t = F.center_crop(F.resize(img, size, BILINEAR, antialias=True), [oh, ow])
        want = t.permute(1, 2, 0).reshape(-1).int()
        got = torch.tensor(s["out"], dtype=torch.int32)
        diff = (got - want).abs()
        if diff.max() > 1 or (diff > 0).sum() > max(1, want.numel() // 100):
            i = int(diff.argmax())
            sys.exit(f"FAIL: {h}x{w}x{c} -> {oh}x{ow} sample {k} ({ {x: y for x, y in s.items() if x != 'out'} }): "
                     f"value {i} is {got[i]}, torchvision {want[i]}; {(diff > 0).sum()} of {want.numel()} differ")
        count, off, total = count + 1, off + int((diff > 0).sum()), total + want.numel()
print(f"ok: resize and crop of {count} samples as torchvision's antialiased resized_crop / resize + "
      f"center_crop: {off} of {total} values one grey level off")
