"""A small DeepLab-style network of dilated (atrous) convolutions, with rectangular kernels, as PyTorch writes it,
exported to ONNX, and PyTorch's float64 reference of one step from the exported weights
(scripts/export_onnx.py --atrous OUT_DIR runs it).

The module (input 3x16x16, 10 classes):
  h = tanh(stem(x))                 3x3, stride 2, padding 1: 8x8x8
  a = tanh(atrous2(h))              3x3, dilation 2, padding 2: the plane kept
  b = atrous3(a)                    3x3, dilation 3, padding 3, 2 groups, no bias: the plane kept
  r = tanh(strip(a))                 1x3, stride 1x2, padding 0x1: 8x8x4
  c = tanh(column(r))               3x1, stride 2x1, padding 1x0, dilation 2: 8x3x4
  d = tanh(down(a + b))             3x3, stride 2, dilation 2, padding 2: 8x4x4
  e = wide(d)                       2x2, dilation 3, padding 1: an even kernel spanning 4 pixels, 8x3x3
  logits = fc(pool(e).flatten(1) + pool(c).flatten(1))
so snug maps Conv's dilations 2 and 3 with strides 1 and 2, groups, no bias, an even kernel, and a kernel, stride
and padding per axis. Tanh, not ReLU:
no decision near a tie that float32 engines could take differently.

One export (torch.manual_seed(SEED), opset 13, training=TRAINING, do_constant_folding=False) at 3x16x16 into
OUT_DIR/atrous.onnx, and PyTorch's one step in float64 (and float32, the yardstick) on a fixed batch:
OUT_DIR/atrous_ref.f64 with its index atrous_ref.json, in one pass and as micro-batches of MICRO_BATCH. The batch:
BATCH images whose values come from resnet18_reference.py's LCG (seed BATCH_SEED), the first BATCH of
resnet18_reference.LABELS.
"""
import sys

import resnet18_reference as ref

SEED = 11
BATCH_SEED = 41
BATCH = 4
MICRO_BATCH = 2
SIZE = 16


def atrous_module(torch):
    nn = torch.nn

    class AtrousNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.atrous2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
            self.atrous3 = nn.Conv2d(8, 8, 3, padding=3, dilation=3, groups=2, bias=False)
            self.down = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2)
            self.wide = nn.Conv2d(8, 8, 2, padding=1, dilation=3)
            self.strip = nn.Conv2d(8, 8, (1, 3), stride=(1, 2), padding=(0, 1))
            self.column = nn.Conv2d(8, 8, (3, 1), stride=(2, 1), padding=(1, 0), dilation=2)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            h = torch.tanh(self.stem(x))
            a = torch.tanh(self.atrous2(h))
            d = torch.tanh(self.down(a + self.atrous3(a)))
            c = torch.tanh(self.column(torch.tanh(self.strip(a))))
            return self.fc(torch.flatten(self.pool(self.wide(d)), 1) + torch.flatten(self.pool(c), 1))

    torch.manual_seed(SEED)
    return AtrousNet().train()


def net():
    """The module with PyTorch's seeded initial weights (the CLI test loads snug's trained ones into it)."""
    import torch
    return atrous_module(torch)


def main(out_dir):
    ref.write_image_twin(atrous_module, out_dir, "atrous", BATCH_SEED, (BATCH, 3, SIZE, SIZE), MICRO_BATCH)


if __name__ == "__main__":
    main(sys.argv[1])
