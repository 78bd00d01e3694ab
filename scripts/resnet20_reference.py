"""The zoo's resnet20 (models/resnet20.ini) as a PyTorch module, exported to ONNX, and PyTorch's float64 reference
of one step from the exported weights (scripts/export_onnx.py --resnet20 OUT_DIR runs it).

The module is CIFAR's ResNet-20 written with torch.nn layers under the zoo's layer names (conv1, bn1, s1b1.conv1,
s1b1.bn1, ..., s2b1.down, s2b1.down_bn, ..., fc), so that its state_dict keys are the zoo's parameter names:
conv3x3(16) + BatchNorm + ReLU, three stages of three basic blocks of 16, 32 and 64 channels (the first block of
stages 2 and 3 halves the plane with stride 2, its shortcut a 1x1 convolution with stride 2 and a BatchNorm),
the residual added before the block's second ReLU, global average pooling and a Linear 64 -> 10. The
convolutions keep their biases, as the zoo's do (before a BatchNorm their gradient is 0 in exact arithmetic,
so each float32 engine's is rounding alone, and so is its limit).

Two exports (torch.manual_seed(SEED), opset 13, training=TRAINING, do_constant_folding=False):
  OUT_DIR/resnet20.onnx     at the zoo's input 1x32x32, which cli_onnx_resnet20 plans against `--model resnet20`;
  OUT_DIR/resnet20_16.onnx  the same module at 1x16x16, whose one step PyTorch computes in float64 (and float32,
                            the yardstick) on a fixed batch: OUT_DIR/resnet20_16_ref.f64 with its index
                            resnet20_16_ref.json, in one pass and as micro-batches of MICRO_BATCH (each runs its
                            BatchNorms on its own statistics, as snug's micro-batches do).
The batch: BATCH images whose values come from resnet18_reference.py's LCG (seed BATCH_SEED), the first BATCH of
resnet18_reference.LABELS. Every ReLU decision of every forward (the one pass, and each micro-batch's, whose
BatchNorm statistics differ) must lie DECISION_MARGIN float32 deviations from its tie
(resnet18_reference.check_decisions), or the script exits. The reference runs at 16x16 because a batch whose
decisions all keep that distance is rare at 32x32: the closest of a ReLU's units to zero comes nearer as the
units grow in number.
"""
import os
import sys

import resnet18_reference as ref

SEED = 20
BATCH_SEED = 55  # the first seed from 41 whose decisions check_decisions accepts
BATCH = 4
MICRO_BATCH = 2  # 2 images of 4x4 in stage 3: 32 values per BatchNorm channel
ZOO_SIZE = 32
REF_SIZE = 16


def resnet20_module(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, c, stride):
            super().__init__()
            self.conv1, self.bn1, self.relu1 = nn.Conv2d(cin, c, 3, stride, 1), nn.BatchNorm2d(c), nn.ReLU()
            self.conv2, self.bn2 = nn.Conv2d(c, c, 3, 1, 1), nn.BatchNorm2d(c)
            self.shortcut = stride != 1 or cin != c
            if self.shortcut:
                self.down, self.down_bn = nn.Conv2d(cin, c, 1, stride, 0), nn.BatchNorm2d(c)
            self.relu2 = nn.ReLU()

        def forward(self, x):
            out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
            return self.relu2(out + (self.down_bn(self.down(x)) if self.shortcut else x))

    class ResNet20(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.relu1 = nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()
            cin = 16
            for s, c in enumerate((16, 32, 64), start=1):
                for b in range(1, 4):
                    setattr(self, f"s{s}b{b}", Block(cin, c, 2 if s > 1 and b == 1 else 1))
                    cin = c
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.relu1(self.bn1(self.conv1(x)))
            for s in range(1, 4):
                for b in range(1, 4):
                    x = getattr(self, f"s{s}b{b}")(x)
            return self.fc(torch.flatten(self.pool(x), 1))

    torch.manual_seed(SEED)
    return ResNet20().train()


def export(torch, path, size):
    ref.export_image_twin(torch, resnet20_module, path, (1, size, size))


def exported_net(torch, path):
    return ref.load_exported(torch, resnet20_module(torch), path, "resnet20")


def main(out_dir):
    import torch
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    export(torch, os.path.join(out_dir, "resnet20.onnx"), ZOO_SIZE)
    path = os.path.join(out_dir, "resnet20_16.onnx")
    export(torch, path, REF_SIZE)
    ref.write_image_reference(torch, os.path.join(out_dir, "resnet20_16_ref"), lambda: exported_net(torch, path),
                              BATCH_SEED, (BATCH, 1, REF_SIZE, REF_SIZE), MICRO_BATCH, "resnet20")


if __name__ == "__main__":
    main(sys.argv[1])
