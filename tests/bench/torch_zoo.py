"""cnntrain's model zoo (src/model/zoo.cpp, resnet.cpp) in PyTorch, shared by the throughput comparison
(tests/bench/torch_bench.py) and the numerical parity test (tests/parity/torch_parity.py), so that both
compare like with like. Module names follow cnntrain's layer names, so a state_dict key ("layer1.0.conv1.weight",
"bn1.running_mean") is the cnntrain parameter or buffer of the same name; the ImageNet ResNets are torchvision's
(whose names cnntrain follows). Layout differences (NHWC/KRSC in cnntrain, NCHW/OIHW here) are the caller's."""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


def lenet5(in_ch=1, classes=10, hw=28):
    """conv 5x5 (pad 2) + ReLU + max pool, conv 5x5 + ReLU + max pool, FC 120, 84, classes (with biases)."""
    s = ((hw + 4 - 4) // 2 - 4) // 2
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(in_ch, 6, 5, padding=2)), ("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(6, 16, 5)), ("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)),
        ("flatten", nn.Flatten()), ("fc1", nn.Linear(16 * s * s, 120)), ("relu3", nn.ReLU()),
        ("fc2", nn.Linear(120, 84)), ("relu4", nn.ReLU()), ("fc3", nn.Linear(84, classes))]))


def fmnist_cnn(in_ch=1, classes=10, hw=28):
    """Two stages of conv 3x3 (no bias) + batch norm + ReLU + 2x2 max pool (16, 32 channels), FC 128, classes."""
    s = hw // 4
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(in_ch, 16, 3, padding=1, bias=False)), ("bn1", nn.BatchNorm2d(16)),
        ("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(16, 32, 3, padding=1, bias=False)), ("bn2", nn.BatchNorm2d(32)),
        ("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)),
        ("flatten", nn.Flatten()), ("fc1", nn.Linear(32 * s * s, 128)), ("relu3", nn.ReLU()),
        ("fc2", nn.Linear(128, classes))]))


class PadBlock(nn.Module):
    """Basic block with He et al.'s option-A shortcut as cnntrain builds it: x subsampled by the stride and
    zero channels appended (after the input's) up to the block's width; no parameters."""

    def __init__(self, c_in, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.stride, self.pad = stride, c - c_in

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        s = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            s = F.pad(s, (0, 0, 0, 0, 0, self.pad))
        return self.relu(y + s)


class ResNet(nn.Module):
    """A stem, stages of blocks named layer<stage>.<block>, global average pooling, fc."""

    def __init__(self, stem, stages, width, classes):
        super().__init__()
        for name, m in stem:
            self.add_module(name, m)
        self.stem = [name for name, _ in stem]
        for i, blocks in enumerate(stages):
            self.add_module("layer%d" % (i + 1), nn.Sequential(*blocks))
        self.nstages = len(stages)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        for name in self.stem:
            x = getattr(self, name)(x)
        for i in range(self.nstages):
            x = getattr(self, "layer%d" % (i + 1))(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet_cifar(depth, in_ch=3, classes=10, hw=32):
    """He et al. 2016 sec. 4.2: 6n+2 layers, 16/32/64 channels, option-A shortcuts."""
    n = (depth - 2) // 6
    stages, c_in = [], 16
    for stage, c in enumerate((16, 32, 64)):
        stages.append([PadBlock(c_in if b == 0 else c, c, 2 if stage > 0 and b == 0 else 1) for b in range(n)])
        c_in = c
    stem = [("conv1", nn.Conv2d(in_ch, 16, 3, 1, 1, bias=False)), ("bn1", nn.BatchNorm2d(16)), ("relu1", nn.ReLU())]
    return ResNet(stem, stages, 64, classes)


def _basic(c_in, c, stride):
    down = None
    if stride != 1 or c_in != c:
        down = nn.Sequential(nn.Conv2d(c_in, c, 1, stride, bias=False), nn.BatchNorm2d(c))
    return torchvision.models.resnet.BasicBlock(c_in, c, stride, down)


def fmnist_resnet(in_ch=1, classes=10, hw=28):
    """3x3 stem (32) + batch norm + ReLU + 2x2 max pool, basic blocks of 32, 64 (stride 2), 128 (stride 2) with
    1x1 projection shortcuts where the shape changes, global average pooling, fc."""
    stem = [("conv1", nn.Conv2d(in_ch, 32, 3, 1, 1, bias=False)), ("bn1", nn.BatchNorm2d(32)), ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(2))]
    return ResNet(stem, [[_basic(32, 32, 1)], [_basic(32, 64, 2)], [_basic(64, 128, 2)]], 128, classes)


def resnet_imagenet(depth, in_ch=3, classes=1000, hw=224):
    """torchvision's ResNet-18/34 and ResNet-50 (v1.5: the stride in the 3x3 convolution)."""
    m = getattr(torchvision.models, "resnet%d" % depth)(num_classes=classes)
    if in_ch != 3:
        m.conv1 = nn.Conv2d(in_ch, 64, 7, 2, 3, bias=False)
    return m


# Model name -> builder(in_ch, classes, hw), as cnntrain's --model names them.
ZOO = {
    "lenet5": lenet5,
    "fmnist_cnn": fmnist_cnn,
    "fmnist_resnet": fmnist_resnet,
    **{"resnet%d" % d: (lambda d: lambda in_ch=3, classes=10, hw=32: resnet_cifar(d, in_ch, classes, hw))(d)
       for d in (20, 32, 44, 56, 110)},
    **{"resnet%d" % d: (lambda d: lambda in_ch=3, classes=1000, hw=224: resnet_imagenet(d, in_ch, classes, hw))(d)
       for d in (18, 34, 50)},
}
