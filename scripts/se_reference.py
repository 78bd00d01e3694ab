"""A small network of broadcasting arithmetic as PyTorch writes it, exported to ONNX, and PyTorch's float64
reference of one step from the exported weights (scripts/export_onnx.py --se OUT_DIR runs it).

The module (input 3x16x16, 10 classes):
  x = (x - mean) / std                          per-channel normalisation by constants (1, 3, 1, 1): buffers
                                                registered with persistent=False, which PyTorch exports as
                                                Constant nodes and keeps out of the state_dict
  h = conv1(x); h = h * sigmoid(h)              SiLU written out: Mul of two computed tensors of one shape
  s = sigmoid(fc2(relu(fc1(pool(h).flatten(1))))).view(N, 8, 1, 1)
  e = h * s                                     squeeze-excitation: (N, 8, 16, 16) times (N, 8, 1, 1)
  r = conv2(e)
  y = (r - h * s[:, :, None, None]) / (1.5 + tanh(e))
                                                a residual Sub and a Div of computed tensors; s unsqueezed
  logits = fc(pool(y).squeeze(-1).squeeze(-1))  Squeeze of a computed tensor
so snug maps Sub and Div by constants of 3 values, Mul of one shape and Mul, Sub, Div that broadcast, and
Unsqueeze and Squeeze of computed tensors (onto its reshape layer).

One export (torch.manual_seed(SEED), opset 13, training=TRAINING, do_constant_folding=False) at 3x16x16 into
OUT_DIR/se.onnx, and PyTorch's one step in float64 (and float32, the yardstick) on a fixed batch: OUT_DIR/se_ref.f64
with its index se_ref.json, in one pass and as micro-batches of MICRO_BATCH. The batch: BATCH images whose values
come from resnet18_reference.py's LCG (seed BATCH_SEED), the first BATCH of resnet18_reference.LABELS; the only
decisions (fc1's ReLU) must lie DECISION_MARGIN float32 deviations from their tie (check_decisions).
"""
import sys

import resnet18_reference as ref

SEED = 7
BATCH_SEED = 41
BATCH = 4
MICRO_BATCH = 2
SIZE = 16
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def se_module(torch):
    nn = torch.nn

    class SeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1), persistent=False)
            self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1), persistent=False)
            self.conv1 = nn.Conv2d(3, 8, 3, 1, 1)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.relu, self.fc2 = nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 8)
            self.conv2 = nn.Conv2d(8, 8, 3, 1, 1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            x = (x - self.mean) / self.std
            h = self.conv1(x)
            h = h * torch.sigmoid(h)
            s = torch.sigmoid(self.fc2(self.relu(self.fc1(torch.flatten(self.pool(h), 1)))))
            e = h * s.view(x.size(0), 8, 1, 1)
            y = (self.conv2(e) - h * s[:, :, None, None]) / (1.5 + torch.tanh(e))
            return self.fc(self.pool(y).squeeze(-1).squeeze(-1))

    torch.manual_seed(SEED)
    return SeNet().train()


def main(out_dir):
    ref.write_image_twin(se_module, out_dir, "se", BATCH_SEED, (BATCH, 3, SIZE, SIZE), MICRO_BATCH)


if __name__ == "__main__":
    main(sys.argv[1])
