"""Writes the ONNX files tests/e2e/test_onnx_train.sh trains: export_for_training.py DIR (run in build/pyvenv).

DIR/resnet_bn.onnx: a small residual CNN for 1x28x28 images and 10 classes, exported by the TorchScript
exporter in training mode (BatchNormalization kept, opset 17, initializer names = state_dict names);
DIR/resnet_folded.onnx (+ .onnx.data): the same network through the default exporter (batch norm folded,
opset 18+, external data); DIR/rgb32.onnx: the network for 3x32x32 images (a shape that does not fit
Fashion-MNIST).
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


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    for name, c, hw in (("resnet_bn", 1, 28), ("rgb32", 3, 32)):
        x = torch.randn(2, c, hw, hw)
        torch.onnx.export(Net(c, hw), (x,), f"{out}/{name}.onnx", dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    m = Net(1).eval()
    torch.onnx.export(m, (torch.randn(2, 1, 28, 28),), f"{out}/resnet_folded.onnx", external_data=True,
                      dynamic_shapes=({0: torch.export.Dim("N")},))


main()
