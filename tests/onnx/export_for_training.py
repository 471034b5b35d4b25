"""Writes the ONNX files tests/e2e/test_onnx_train*.sh train: export_for_training.py DIR [NAME] (run in
build/pyvenv; with NAME only DIR/NAME.onnx).

DIR/resnet_bn.onnx: a small residual CNN for 1x28x28 images and 10 classes, exported by the TorchScript
exporter in training mode (BatchNormalization kept, opset 17, initializer names = state_dict names);
DIR/resnet_folded.onnx (+ .onnx.data): the same network through the default exporter (batch norm folded,
opset 18+, external data); DIR/rgb32.onnx: the network for 3x32x32 images (a shape that does not fit
Fashion-MNIST); DIR/mobilenet_bn.onnx and DIR/densenet_bn.onnx: small MobileNetV2- and DenseNet-style networks
for 1x28x28 images (TorchScript exporter, training mode), which tests/e2e/test_onnx_train_mobilenet.sh and
test_onnx_train_densenet.sh train.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, c_in, hw=28):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(c_in, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c1, self.b1 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.down, self.bd = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * (hw // 4) ** 2, 10)

    def forward(self, x):
        x = F.relu(self.bn0(self.stem(x)))
        x = F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + x)
        x = F.max_pool2d(F.relu(self.bd(self.down(x))), 2)
        return self.fc(torch.flatten(x, 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion by t, 3x3 depthwise, ReLU6, linear 1x1 projection, residual if the
    shape stays."""
    def __init__(self, c_in, c_out, stride, t):
        super().__init__()
        h = c_in * t
        self.conv = nn.Sequential(
            nn.Conv2d(c_in, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, h, 3, stride, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, c_out, 1, bias=False), nn.BatchNorm2d(c_out))
        self.res = stride == 1 and c_in == c_out

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


class MobileNetStyle(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6()),
            InvertedResidual(16, 16, 1, 2), InvertedResidual(16, 24, 2, 4), InvertedResidual(24, 24, 1, 4),
            InvertedResidual(24, 32, 2, 4), InvertedResidual(32, 32, 1, 4))
        self.classifier = nn.Sequential(nn.Dropout(0.1), nn.Linear(32, 10))

    def forward(self, x):
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class DenseNetStyle(nn.Module):
    """A stem (convolution, batch norm, ReLU, max pooling), two dense blocks (pre-activation batch norm, ReLU,
    1x1 and 3x3 convolutions, concatenated), a transition (batch norm, ReLU, 1x1, average pooling) between them."""
    def __init__(self, growth=8):
        super().__init__()
        self.conv0, self.norm0 = nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.pool0 = nn.MaxPool2d(2)
        self.block1, c = self.dense(16, 3, growth)
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 32, 1, bias=False), nn.AvgPool2d(2))
        self.block2, c = self.dense(32, 3, growth)
        self.norm5, self.fc = nn.BatchNorm2d(c), nn.Linear(c, 10)

    @staticmethod
    def dense(c, n, growth):
        layers = nn.ModuleList()
        for _ in range(n):
            layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, 4 * growth, 1, bias=False),
                                        nn.BatchNorm2d(4 * growth), nn.ReLU(),
                                        nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)))
            c += growth
        return layers, c

    def forward(self, x):
        x = self.pool0(F.relu(self.norm0(self.conv0(x))))
        for layer in self.block1:
            x = torch.cat([x, layer(x)], 1)
        x = self.trans(x)
        for layer in self.block2:
            x = torch.cat([x, layer(x)], 1)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.norm5(x)), 1), 1))


def main():
    out = sys.argv[1]
    nets = (("resnet_bn", 1, 28, lambda: Net(1)), ("rgb32", 3, 32, lambda: Net(3, 32)),
            ("mobilenet_bn", 1, 28, MobileNetStyle), ("densenet_bn", 1, 28, DenseNetStyle))
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for name, c, hw, make in nets:
        if only and name != only:
            continue
        torch.manual_seed(0)  # each network's initial weights, whichever others are written
        x = torch.randn(2, c, hw, hw)
        torch.onnx.export(make(), (x,), f"{out}/{name}.onnx", dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    if only:
        return
    m = Net(1).eval()
    torch.onnx.export(m, (torch.randn(2, 1, 28, 28),), f"{out}/resnet_folded.onnx", external_data=True,
                      dynamic_shapes=({0: torch.export.Dim("N")},))


if __name__ == "__main__":  # import_parity.py imports InvertedResidual from here
    main()
