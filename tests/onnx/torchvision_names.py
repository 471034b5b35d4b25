"""Writes the state_dict keys of torchvision's mobilenet_v2 and efficientnet_b0 (1000 classes), one
"NAME NUMEL" line per tensor in state_dict order, to tests/onnx/torchvision/MODEL.txt: the fixture
tests/unit/test_zoo.cpp checks cnntrain's zoo names against. Run in build/pyvenv:

    build/pyvenv/bin/python tests/onnx/torchvision_names.py tests/onnx/torchvision
"""
import sys

import torchvision

out = sys.argv[1]
for name in ("mobilenet_v2", "efficientnet_b0"):
    m = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    with open(f"{out}/{name}.txt", "w") as f:
        f.write(f"# torchvision {torchvision.__version__} {name}: state_dict keys and sizes\n")
        for k, v in m.state_dict().items():
            f.write(f"{k} {v.numel()}\n")
