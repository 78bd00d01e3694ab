"""The zoo's unet (models/unet.ini) as a PyTorch module, exported to ONNX, and PyTorch's float64 reference of one
step from the exported weights (scripts/export_onnx.py --unet OUT_DIR runs it).

The module is the twin of tests/reference/make_references.py's functional unet, written with torch.nn layers
under the zoo's layer names (enc1.conv1, enc1.gn1, ..., up4, dec4.conv1, ..., head), so that its state_dict keys
are the zoo unet's parameter names: four levels of 16, 32, 64 and 128 channels and a 256-channel bottleneck, each
two Conv2d(3, padding 1) + GroupNorm(8) + ReLU; MaxPool2d(2, 2) down, ConvTranspose2d(2, stride 2) up, the skip
concatenated before the up-sampled channels; a 1x1 Conv2d to 2 classes per pixel.

Two exports (torch.manual_seed(SEED), opset 13, training=TRAINING, do_constant_folding=False):
  OUT_DIR/unet.onnx     at the zoo's input 1x256x256, which test_onnx_unet plans against the zoo's unet;
  OUT_DIR/unet32.onnx   the same module at 1x32x32, whose one step PyTorch computes in float64 (and float32, the
                        yardstick) on a fixed batch: OUT_DIR/unet32_ref.f64 with its index unet32_ref.json, in one
                        pass and as 2 micro-batches of 1 (GroupNorm keeps them the same step);
  OUT_DIR/unet32_nearest.onnx   its variant that up-samples with nn.Upsample(scale_factor=2) (ONNX's Resize) and
                        a 1x1 convolution, and its reference unet32_nearest_ref.{f64,json}, the same way.
The batch: 2 images whose values come from resnet18_reference.py's LCG (seed BATCH_SEED), then one target per
pixel, the next states' top bit (class 0 or 1). The loss is snug's per-pixel cross-entropy, summed over the
pixels and divided by their count. Every ReLU and max-pool decision of the batch must lie DECISION_MARGIN float32
deviations from its tie (resnet18_reference.check_decisions), or the script exits.
"""
import os
import sys

import numpy as np

import resnet18_reference as ref

SEED = 21
BATCH_SEED = 45  # a batch whose decisions check_decisions accepts (51 puts one of dec2.relu2 1.8 deviations from zero)
BATCH = 2
MICRO_BATCH = 1
ZOO_SIZE = 256
REF_SIZE = 32


def unet_module(torch, nearest=False):
    """The zoo's unet; nearest: up-sampling by nn.Upsample(scale_factor=2) (ONNX's Resize) and a 1x1 Conv2d
    halving the channels (up4.1, ...) instead of the transposed convolutions."""
    nn = torch.nn

    class Double(nn.Module):
        def __init__(self, cin, c):
            super().__init__()
            self.conv1, self.gn1, self.relu1 = nn.Conv2d(cin, c, 3, 1, 1), nn.GroupNorm(8, c), nn.ReLU()
            self.conv2, self.gn2, self.relu2 = nn.Conv2d(c, c, 3, 1, 1), nn.GroupNorm(8, c), nn.ReLU()

        def forward(self, x):
            return self.relu2(self.gn2(self.conv2(self.relu1(self.gn1(self.conv1(x))))))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            cin = 1
            for i, c in enumerate((16, 32, 64, 128), start=1):
                setattr(self, f"enc{i}", Double(cin, c))
                setattr(self, f"pool{i}", nn.MaxPool2d(2, 2))
                cin = c
            self.mid = Double(128, 256)
            for i, c in zip((4, 3, 2, 1), (128, 64, 32, 16)):
                setattr(self, f"up{i}", nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(2 * c, c, 1)) if nearest
                        else nn.ConvTranspose2d(2 * c, c, 2, stride=2))
                setattr(self, f"dec{i}", Double(2 * c, c))
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            skips = []
            for i in range(1, 5):
                x = getattr(self, f"enc{i}")(x)
                skips.append(x)
                x = getattr(self, f"pool{i}")(x)
            x = self.mid(x)
            for i in (4, 3, 2, 1):
                x = getattr(self, f"dec{i}")(torch.cat([skips[i - 1], getattr(self, f"up{i}")(x)], dim=1))
            return self.head(x)

    torch.manual_seed(SEED)
    return UNet().train()


def export(torch, path, size, nearest=False):
    torch.onnx.export(unet_module(torch, nearest), torch.zeros(2, 1, size, size), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})


def exported_net(torch, path, nearest=False):
    """The module in float64 with exactly the ONNX file's initializers (the weights snug starts from)."""
    import onnx
    from onnx import numpy_helper
    net = unet_module(torch, nearest).double()
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).astype(np.float64))
             for t in onnx.load(path).graph.initializer}
    net.load_state_dict(inits, strict=True)
    return net


def batch(torch):
    x, state = ref.lcg_inputs(BATCH_SEED, (BATCH, 1, REF_SIZE, REF_SIZE))
    states, _ = ref.lcg_states(state, BATCH * REF_SIZE * REF_SIZE)
    y = np.array([v >> 63 for v in states], dtype=np.int64).reshape(BATCH, REF_SIZE, REF_SIZE)
    desc = {"images": BATCH, "shape": [1, REF_SIZE, REF_SIZE], "generator": "lcg64", "seed": BATCH_SEED,
            "multiplier": ref.LCG_MUL, "increment": ref.LCG_ADD,
            "value": "state = state * multiplier + increment (mod 2^64) per value, in C order; value = "
                     "(state >> 40) / 2^23 - 1; then per pixel, in C order, target = the next state >> 63"}
    return torch.from_numpy(x.astype(np.float32).astype(np.float64)), torch.from_numpy(y), desc


def reference(torch, out_dir, stem, nearest):
    """OUT_DIR/STEM.onnx at REF_SIZE and PyTorch's step on it: OUT_DIR/STEM_ref.{f64,json}."""
    path = os.path.join(out_dir, stem + ".onnx")
    export(torch, path, REF_SIZE, nearest)
    x, y, desc = batch(torch)
    margin, where = ref.check_decisions(torch, exported_net(torch, path, nearest),
                                        exported_net(torch, path, nearest).float(), x, stem)
    print(f"{stem} reference: every decision at least {margin:.3g} float32 deviations from its tie ({where})")
    cases, micro_of = {}, {"one_pass": BATCH, "micro_batches": MICRO_BATCH}
    for case in ("one_pass", "micro_batches"):
        cases[case] = ref.one_step(torch, exported_net(torch, path, nearest), x, y, micro_of[case])
    for case in ("one_pass", "micro_batches"):
        micro_of[case + "_float32"] = micro_of[case]
        cases[case + "_float32"] = ref.one_step(torch, exported_net(torch, path, nearest).float(), x.float(), y,
                                                micro_of[case])
    ref.write_reference(os.path.join(out_dir, stem + "_ref"), cases, micro_of, desc)


def main(out_dir):
    import torch
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    export(torch, os.path.join(out_dir, "unet.onnx"), ZOO_SIZE)
    reference(torch, out_dir, "unet32", False)
    reference(torch, out_dir, "unet32_nearest", True)


if __name__ == "__main__":
    main(sys.argv[1])
