#!/usr/bin/python3
"""Writes the ONNX models of snug's ONNX tests (tests/data/onnx/), with onnx.helper (Debian's python3-onnx).

The models are built node by node as torch.onnx.export (opset 13 to 15, training=TrainingMode.TRAINING,
do_constant_folding=False) writes them: initializers under the module's state_dict names, "/module/Op" node
names, and the Shape -> Gather -> Unsqueeze -> Concat chain that `x.view(x.size(0), -1)` exports. Weights are
drawn from a fixed seed, so the files are the same on every run. The files under bad/ are the refusals the
tests expect: each named for what is wrong with it.

  usage: /usr/bin/python3 scripts/export_onnx.py [OUT_DIR]     (default: tests/data/onnx)
         /usr/bin/python3 scripts/export_onnx.py --resnet18 OUT_DIR [--write-summary]
         /usr/bin/python3 scripts/export_onnx.py --unet OUT_DIR      (the zoo's unet: unet_reference.py)
         /usr/bin/python3 scripts/export_onnx.py --resnet20 OUT_DIR  (the zoo's resnet20: resnet20_reference.py)
         /usr/bin/python3 scripts/export_onnx.py --gpt OUT_DIR       (the zoo's gpt: gpt_twin.py)
         /usr/bin/python3 scripts/export_onnx.py --se OUT_DIR        (broadcasting arithmetic: se_reference.py)
         /usr/bin/python3 scripts/export_onnx.py --atrous OUT_DIR    (dilated convolutions: atrous_reference.py)

With PyTorch installed (python3-torch), the same script also exports a torchvision-free two-layer network with
torch.onnx.export into OUT_DIR/torch_mlp.onnx, to check the loader against a real exporter.

--resnet18 (python3-torch and python3-torchvision) exports torchvision's resnet18(num_classes=10), seeded, at
3x32x32 into OUT_DIR/resnet18.onnx (about 45 MB: made in the build tree, never committed) and computes PyTorch's
float64 reference of one step from the exported weights on a fixed batch (resnet18_batch.py describes it): every
parameter's gradient and every BatchNorm's running statistics after the forward, for the batch of 8 in one pass
and as 4 micro-batches of 2, written to OUT_DIR/resnet18_ref.f64 (little-endian float64) with its index
OUT_DIR/resnet18_ref.json. The summary committed beside the test models (tests/data/onnx/resnet18_ref.json: the
losses, per tensor the norm and a few entries) must agree with it; --write-summary rewrites that summary.
"""
import importlib
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(41)


def weight(name, *shape, rng=RNG):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    bound = 1.0 / np.sqrt(fan_in)
    return numpy_helper.from_array(rng.uniform(-bound, bound, shape).astype(np.float32), name)


def const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def batchnorm(prefix, c):
    return [const(f"{prefix}.weight", RNG.uniform(0.5, 1.5, c)), const(f"{prefix}.bias", RNG.uniform(-0.1, 0.1, c)),
            const(f"{prefix}.running_mean", np.zeros(c)), const(f"{prefix}.running_var", np.ones(c))]


def image_input(name="input", c=1, h=28, w=28, batch="batch"):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, c, h, w])


def logits(name="logits", classes=10):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", classes])


def model(nodes, inits, inputs, outputs, opset, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(graph, producer_name="snug scripts/export_onnx.py",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def flatten_by_view(x, out, prefix):
    """x.view(x.size(0), -1) as PyTorch exports it: a constant shape computation feeding Reshape."""
    return [
        helper.make_node("Shape", [x], [f"{prefix}_shape"], name=f"{prefix}/Shape"),
        helper.make_node("Constant", [], [f"{prefix}_zero"], name=f"{prefix}/Constant",
                         value=helper.make_tensor("v", TensorProto.INT64, [], [0])),
        helper.make_node("Gather", [f"{prefix}_shape", f"{prefix}_zero"], [f"{prefix}_n"], name=f"{prefix}/Gather",
                         axis=0),
        helper.make_node("Constant", [], [f"{prefix}_axes"], name=f"{prefix}/Constant_1",
                         value=helper.make_tensor("v", TensorProto.INT64, [1], [0])),
        helper.make_node("Unsqueeze", [f"{prefix}_n", f"{prefix}_axes"], [f"{prefix}_n1"], name=f"{prefix}/Unsqueeze"),
        helper.make_node("Constant", [], [f"{prefix}_minus1"], name=f"{prefix}/Constant_2",
                         value=helper.make_tensor("v", TensorProto.INT64, [1], [-1])),
        helper.make_node("Concat", [f"{prefix}_n1", f"{prefix}_minus1"], [f"{prefix}_target"],
                         name=f"{prefix}/Concat", axis=0),
        helper.make_node("Reshape", [x, f"{prefix}_target"], [out], name=f"{prefix}/Reshape"),
    ]


def mlp():
    """input (N, 1, 28, 28) -> Flatten -> fc1 (Gemm 784-64) -> ReLU -> Dropout(0.25) -> fc2 (MatMul + Add)."""
    inits = [weight("fc1.weight", 64, 784), weight("fc1.bias", 64),
             numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(weight("w", 10, 64)).T),
                                     "onnx::MatMul_20"),
             weight("fc2.bias", 10), const("ratio", 0.25), const("training", True, np.bool_)]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], name="/flatten/Flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h1"], ["r1"], name="/relu/Relu"),
        helper.make_node("Dropout", ["r1", "ratio", "training"], ["d1", "mask"], name="/drop/Dropout"),
        helper.make_node("MatMul", ["d1", "onnx::MatMul_20"], ["mm"], name="/fc2/MatMul"),
        helper.make_node("Add", ["fc2.bias", "mm"], ["logits"], name="/fc2/Add"),
    ]
    return model(nodes, inits, [image_input()], [logits()], 13, "mlp")


def tiny_mlp():
    """input (N, 8), as a vector: fc1 (MatMul + Add, 8-4) -> ReLU -> Dropout(0.5) -> fc2 (Gemm 4-3); small
    enough to seed the fuzzer (tests/fuzz/onnx/corpus/)."""
    inits = [numpy_helper.from_array(np.ascontiguousarray(numpy_helper.to_array(weight("w", 4, 8)).T),
                                     "onnx::MatMul_7"),
             weight("fc1.bias", 4), weight("fc2.weight", 3, 4), weight("fc2.bias", 3)]
    nodes = [
        helper.make_node("MatMul", ["input", "onnx::MatMul_7"], ["mm"], name="/fc1/MatMul"),
        helper.make_node("Add", ["mm", "fc1.bias"], ["h"], name="/fc1/Add"),
        helper.make_node("Relu", ["h"], ["r"], name="/relu/Relu"),
        helper.make_node("Dropout", ["r"], ["d"], name="/drop/Dropout"),
        helper.make_node("Gemm", ["d", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
    ]
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 8])
    return model(nodes, inits, [x], [logits(classes=3)], 14, "tiny_mlp")


def squash_mlp():
    """input (N, 1, 28, 28) -> Flatten -> fc1 (Gemm 784-32) -> Sigmoid -> fc2 (Gemm 32-16) -> Tanh -> fc3 (Gemm
    16-10): nn.Sigmoid and nn.Tanh as PyTorch exports them. Its own seed, so the files drawn from RNG stay."""
    rng = np.random.default_rng(43)
    inits = [weight("fc1.weight", 32, 784, rng=rng), weight("fc1.bias", 32, rng=rng),
             weight("fc2.weight", 16, 32, rng=rng), weight("fc2.bias", 16, rng=rng),
             weight("fc3.weight", 10, 16, rng=rng), weight("fc3.bias", 10, rng=rng)]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], name="/flatten/Flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Sigmoid", ["h1"], ["s1"], name="/sigmoid/Sigmoid"),
        helper.make_node("Gemm", ["s1", "fc2.weight", "fc2.bias"], ["h2"], name="/fc2/Gemm", transB=1),
        helper.make_node("Tanh", ["h2"], ["t2"], name="/tanh/Tanh"),
        helper.make_node("Gemm", ["t2", "fc3.weight", "fc3.bias"], ["logits"], name="/fc3/Gemm", transB=1),
    ]
    return model(nodes, inits, [image_input()], [logits()], 13, "squash_mlp")


def scalar_const(name, value):
    """A Constant node of one float: what PyTorch exports for a Python number in forward()."""
    return helper.make_node("Constant", [], [name], name=f"/{name}/Constant",
                            value=helper.make_tensor("v", TensorProto.FLOAT, [], [value]))


def arith_mlp():
    """input (N, 1, 28, 28) -> Flatten -> fc1 (Gemm 784-32) -> * 0.5 -> Tanh -> 1 - x -> / 4 -> + 0.25 -> fc2
    (Gemm 32-10): arithmetic with Python numbers as PyTorch exports it (Mul, Sub, Div, Add of Constant nodes)."""
    rng = np.random.default_rng(44)
    inits = [weight("fc1.weight", 32, 784, rng=rng), weight("fc1.bias", 32, rng=rng),
             weight("fc2.weight", 10, 32, rng=rng), weight("fc2.bias", 10, rng=rng)]
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], name="/flatten/Flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["h1"], name="/fc1/Gemm", transB=1),
        scalar_const("half", 0.5), scalar_const("one", 1.0), scalar_const("four", 4.0), scalar_const("quarter", 0.25),
        helper.make_node("Mul", ["h1", "half"], ["m"], name="/Mul"),
        helper.make_node("Tanh", ["m"], ["t"], name="/tanh/Tanh"),
        helper.make_node("Sub", ["one", "t"], ["s"], name="/Sub"),
        helper.make_node("Div", ["s", "four"], ["d"], name="/Div"),
        helper.make_node("Add", ["d", "quarter"], ["a"], name="/Add"),
        helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
    ]
    return model(nodes, inits, [image_input()], [logits()], 13, "arith_mlp")


def cnn():
    """conv1+bn1+relu -> maxpool -> [conv2 (no bias)+bn2, + the pooled input] -> relu -> conv3 (stride 2) -> relu
    -> global average pool -> x.view(N, -1) -> fc."""
    inits = [weight("conv1.weight", 8, 1, 3, 3), weight("conv1.bias", 8), *batchnorm("bn1", 8),
             weight("conv2.weight", 8, 8, 3, 3), *batchnorm("bn2", 8),
             weight("conv3.weight", 16, 8, 3, 3), weight("conv3.bias", 16),
             weight("fc.weight", 10, 16), weight("fc.bias", 10)]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1)
    bn = dict(epsilon=1e-5, momentum=0.9, training_mode=1)
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="/conv1/Conv", **conv),
        helper.make_node("BatchNormalization", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"],
                         ["b1"], name="/bn1/BatchNormalization", **bn),
        helper.make_node("Relu", ["b1"], ["r1"], name="/relu1/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight"], ["c2"], name="/conv2/Conv", **conv),
        helper.make_node("BatchNormalization", ["c2", "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var"],
                         ["b2"], name="/bn2/BatchNormalization", **bn),
        helper.make_node("Add", ["b2", "p1"], ["s2"], name="/Add"),
        helper.make_node("Relu", ["s2"], ["r2"], name="/relu2/Relu"),
        helper.make_node("Conv", ["r2", "conv3.weight", "conv3.bias"], ["c3"], name="/conv3/Conv",
                         **dict(conv, strides=[2, 2])),
        helper.make_node("Relu", ["c3"], ["r3"], name="/relu3/Relu"),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"], name="/gap/GlobalAveragePool"),
        *flatten_by_view("gap", "flat", "/view"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return model(nodes, inits, [image_input()], [logits()], 15, "cnn")


def groupnorm_nodes(x, out, prefix, groups):
    """nn.GroupNorm(groups, C) named prefix as PyTorch 1.13 exports it: Reshape to (N, groups, -1),
    InstanceNormalization with unit scale and zero bias, Reshape back to Shape(x), Mul by the weight and Add of
    the bias, each unsqueezed to (C, 1, 1)."""
    node = f"/{prefix}"

    def const(name, dtype, dims, values):
        return helper.make_node("Constant", [], [f"{prefix}_{name}"], name=f"{node}/Constant_{name}",
                                value=helper.make_tensor("v", dtype, dims, values))
    return [
        const("groups", TensorProto.INT64, [3], [0, groups, -1]),
        helper.make_node("Reshape", [x, f"{prefix}_groups"], [f"{prefix}_view"], name=f"{node}/Reshape"),
        const("ones", TensorProto.FLOAT, [groups], [1.0] * groups),
        const("zeros", TensorProto.FLOAT, [groups], [0.0] * groups),
        helper.make_node("InstanceNormalization", [f"{prefix}_view", f"{prefix}_ones", f"{prefix}_zeros"],
                         [f"{prefix}_norm"], name=f"{node}/InstanceNormalization", epsilon=1e-5),
        helper.make_node("Shape", [x], [f"{prefix}_shape"], name=f"{node}/Shape"),
        helper.make_node("Reshape", [f"{prefix}_norm", f"{prefix}_shape"], [f"{prefix}_back"],
                         name=f"{node}/Reshape_1"),
        const("axes", TensorProto.INT64, [2], [1, 2]),
        helper.make_node("Unsqueeze", [f"{prefix}.weight", f"{prefix}_axes"], [f"{prefix}_w"],
                         name=f"{node}/Unsqueeze"),
        helper.make_node("Mul", [f"{prefix}_back", f"{prefix}_w"], [f"{prefix}_mul"], name=f"{node}/Mul"),
        helper.make_node("Unsqueeze", [f"{prefix}.bias", f"{prefix}_axes"], [f"{prefix}_b"],
                         name=f"{node}/Unsqueeze_1"),
        helper.make_node("Add", [f"{prefix}_mul", f"{prefix}_b"], [out], name=f"{node}/Add"),
    ]


def small_unet():
    """The image ops of a UNet at 1x28x28, classified: enc.conv + enc.gn (GroupNorm(2, 8), exported as its
    five nodes) + relu -> maxpool -> up (ConvTranspose 2x2 stride 2) and nn.Upsample(scale_factor=2) (Resize,
    its scales a Concat of constants, as PyTorch exports it) -> Concat(skip, up, upsampled) -> inorm
    (InstanceNorm2d(24, affine=True)) -> relu -> global average pool -> x.view(N, -1) -> fc. Its own RNG, so
    the other files stay as they were."""
    rng = np.random.default_rng(21)
    norm = [const(f"{p}.{k}", rng.uniform(lo, hi, c)) for p, c in (("enc.gn", 8), ("inorm", 24))
            for k, lo, hi in (("weight", 0.5, 1.5), ("bias", -0.1, 0.1))]
    inits = [weight("enc.conv.weight", 8, 1, 3, 3, rng=rng), weight("enc.conv.bias", 8, rng=rng),
             weight("up.weight", 8, 8, 2, 2, rng=rng), weight("up.bias", 8, rng=rng),
             weight("fc.weight", 10, 24, rng=rng), weight("fc.bias", 10, rng=rng), *norm]
    nodes = [
        helper.make_node("Conv", ["input", "enc.conv.weight", "enc.conv.bias"], ["c1"], name="/enc/conv/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
        *groupnorm_nodes("c1", "g1", "enc.gn", 2),
        helper.make_node("Relu", ["g1"], ["r1"], name="/enc/relu/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ConvTranspose", ["p1", "up.weight", "up.bias"], ["u1"], name="/up/ConvTranspose",
                         kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2], dilations=[1, 1], group=1),
        helper.make_node("Constant", [], ["up_ones"], name="/upsample/Constant",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 1.0])),
        helper.make_node("Constant", [], ["up_twos"], name="/upsample/Constant_1",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [2], [2.0, 2.0])),
        helper.make_node("Concat", ["up_ones", "up_twos"], ["up_scales"], name="/upsample/Concat", axis=0),
        helper.make_node("Resize", ["p1", "", "up_scales"], ["z1"], name="/upsample/Resize",
                         coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75, mode="nearest",
                         nearest_mode="floor"),
        helper.make_node("Concat", ["r1", "u1", "z1"], ["cat"], name="/Concat", axis=1),
        helper.make_node("InstanceNormalization", ["cat", "inorm.weight", "inorm.bias"], ["n1"],
                         name="/inorm/InstanceNormalization", epsilon=1e-5),
        helper.make_node("Relu", ["n1"], ["r2"], name="/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="/gap/GlobalAveragePool"),
        *flatten_by_view("gap", "flat", "/view"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return model(nodes, inits, [image_input()], [logits()], 13, "small_unet")


def write_sums(m, path):
    """Per initializer of float type: name, elements, sum and sum of squares in float64, so that a test checks
    the weights a model starts from without a protobuf reader of its own."""
    with open(path, "w") as f:
        for t in m.graph.initializer:
            if t.data_type == TensorProto.FLOAT and len(t.dims) > 0:
                a = numpy_helper.to_array(t).astype(np.float64)
                f.write(f"{t.name} {a.size} {a.sum():.17g} {(a * a).sum():.17g}\n")


def bad_models(good_cnn):
    """name -> bytes of a file snug must refuse."""
    bad = {}
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    m.graph.node[2].op_type = "Elu"  # an op snug does not map
    bad["unknown_op"] = m.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    for a in m.graph.node[0].attribute:
        if a.name == "dilations":
            a.ints[:] = [1, 2]  # unequal dilations: snug takes one dilation for both axes
    bad["bad_attribute"] = m.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    m.graph.input[0].type.tensor_type.shape.dim[2].ClearField("dim_value")
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "height"  # a dynamic dimension besides the batch
    bad["dynamic_shape"] = m.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    m.opset_import[0].version = 11
    bad["old_opset"] = m.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    for a in m.graph.node[3].attribute:
        if a.name == "kernel_shape":
            a.ints[:] = [3, 3]
    m.graph.node[3].attribute.append(helper.make_attribute("pads", [2, 2, 2, 2]))  # more than half the kernel
    bad["overpadded_maxpool"] = m.SerializeToString()
    whole = good_cnn.SerializeToString()
    bad["truncated"] = whole[: len(whole) // 2]
    bad["garbage"] = bytes(RNG.integers(0, 256, 4096, dtype=np.uint8))
    bad.update(bad_image_models(good_cnn))
    bad.update(bad_elementwise_models(good_cnn))
    return bad


def in_place_of_relu1(good_cnn, nodes):
    """cnn.onnx with each node of `nodes` (name: (node, initializers)) in place of the first ReLU."""
    out = {}
    for name, (node, inits) in nodes.items():
        m = onnx.ModelProto()
        m.CopyFrom(good_cnn)
        m.graph.node[2].CopyFrom(node)
        m.graph.initializer.extend(inits)
        out[name] = m.SerializeToString()
    return out


def layout_models(good_cnn):
    """The layout ops snug maps outside the patterns, each in place of the first ReLU of cnn.onnx: Softmax over
    the channels, Transpose of the plane, Slice of the channels (all of them, by a step of 1)."""
    return in_place_of_relu1(good_cnn, {
        "softmax_channels": (helper.make_node("Softmax", ["b1"], ["r1"], name="/relu1/Relu", axis=1), []),
        "transpose_plane": (helper.make_node("Transpose", ["b1"], ["r1"], name="/relu1/Relu", perm=[0, 1, 3, 2]), []),
        "slice_channels": (helper.make_node("Slice", ["b1", "starts", "ends", "axes"], ["r1"], name="/relu1/Relu"),
                           [const("starts", [0], np.int64), const("ends", [8], np.int64),
                            const("axes", [1], np.int64)]),
    })


def bad_elementwise_models(good_cnn):
    """The element-wise and layout ops snug refuses, each in place of the first ReLU: Add of a scalar initializer
    and Mul by a per-channel one (either may be a learned parameter), Mul by a Constant that varies along the
    batch; Softmax, Transpose, Split and Unsqueeze along the batch axis and a Slice by a negative step; and a Softmax as the
    model's output."""
    ints = lambda name, v: const(name, v, np.int64)  # noqa: E731
    bad = in_place_of_relu1(good_cnn, {
        "add_constant": (helper.make_node("Add", ["b1", "shift"], ["r1"], name="/relu1/Relu"), [const("shift", 0.5)]),
        "mul_per_channel": (helper.make_node("Mul", ["b1", "gain"], ["r1"], name="/relu1/Relu"),
                            [const("gain", np.full((8, 1, 1), 0.5))]),
        "softmax_batch": (helper.make_node("Softmax", ["b1"], ["r1"], name="/relu1/Relu", axis=0), []),
        "transpose_batch": (helper.make_node("Transpose", ["b1"], ["r1"], name="/relu1/Relu", perm=[1, 0, 2, 3]), []),
        "slice_negative_step": (helper.make_node("Slice", ["b1", "starts", "ends", "axes", "steps"], ["r1"],
                                                 name="/relu1/Relu"),
                                [ints("starts", [27]), ints("ends", [-29]), ints("axes", [2]), ints("steps", [-1])]),
        "split_batch": (helper.make_node("Split", ["b1", "halves"], ["r1", "r1b"], name="/relu1/Relu", axis=0),
                        [ints("halves", [1, 1])]),
        "unsqueeze_batch": (helper.make_node("Unsqueeze", ["b1", "front"], ["r1"], name="/relu1/Relu"),
                            [ints("front", [0])]),
    })
    m = onnx.ModelProto()  # one value per sample of an exported batch of 2: not a constant of every batch
    m.CopyFrom(good_cnn)
    m.graph.node[2].CopyFrom(helper.make_node("Mul", ["b1", "per_sample"], ["r1"], name="/relu1/Relu"))
    m.graph.node.insert(2, helper.make_node("Constant", [], ["per_sample"], name="/Constant",
                                            value=helper.make_tensor("v", TensorProto.FLOAT, [2, 1, 1, 1], [1, 2])))
    bad["mul_batch_constant"] = m.SerializeToString()
    m = onnx.ModelProto()  # a classifier exported for inference: the probabilities, not the logits
    m.CopyFrom(good_cnn)
    m.graph.node[-1].output[0] = "fc_out"
    m.graph.node.append(helper.make_node("Softmax", ["fc_out"], ["logits"], name="/softmax/Softmax", axis=1))
    bad["softmax_output"] = m.SerializeToString()
    return bad


def bad_image_models(good_cnn):
    """The refusals of the image ops (src/graph/onnx_ops_image.c), made from cnn.onnx without the RNG."""
    bad = {}
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    m.graph.node[2].op_type = "Resize"  # bilinear: snug's up-sampling is nearest
    m.graph.node[2].attribute.append(helper.make_attribute("mode", "linear"))
    bad["resize_linear"] = m.SerializeToString()
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    m.graph.node[0].op_type = "ConvTranspose"
    m.graph.node[0].attribute.append(helper.make_attribute("output_padding", [1, 1]))
    bad["conv_transpose_output_padding"] = m.SerializeToString()
    # nn.GroupNorm(2, C, affine=False) as PyTorch exports it in place of the first BatchNorm: no Mul, no Add
    m = onnx.ModelProto()
    m.CopyFrom(good_cnn)
    gn = [
        helper.make_node("Constant", [], ["gn_shape"], name="/gn1/Constant",
                         value=helper.make_tensor("v", TensorProto.INT64, [3], [0, 2, -1])),
        helper.make_node("Reshape", ["c1", "gn_shape"], ["gn_view"], name="/gn1/Reshape"),
        helper.make_node("Constant", [], ["gn_ones"], name="/gn1/Constant_1",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [2], [1, 1])),
        helper.make_node("Constant", [], ["gn_zeros"], name="/gn1/Constant_2",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [2], [0, 0])),
        helper.make_node("InstanceNormalization", ["gn_view", "gn_ones", "gn_zeros"], ["gn_norm"],
                         name="/gn1/InstanceNormalization", epsilon=1e-5),
        helper.make_node("Shape", ["c1"], ["gn_back"], name="/gn1/Shape"),
        helper.make_node("Reshape", ["gn_norm", "gn_back"], ["b1"], name="/gn1/Reshape_1"),
    ]
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes[:1] + gn + nodes[2:])
    bad["groupnorm_without_affine"] = m.SerializeToString()
    return bad


def export_torch(out_dir):
    try:
        import torch
    except ImportError:
        return
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    torch.onnx.export(net, torch.zeros(1, 1, 28, 28), os.path.join(out_dir, "torch_mlp.onnx"), opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})


# The models the test fixtures export with their PyTorch float64 reference (cmake/SnugTests.cmake's
# snug_torch_fixture): the flag and the script whose main(OUT_DIR) does it.
TWIN_MODULES = {"--unet": "unet_reference", "--resnet20": "resnet20_reference", "--se": "se_reference",
                "--gpt": "gpt_twin", "--attention": "attention_twin", "--atrous": "atrous_reference"}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--resnet18":
        import resnet18_reference
        resnet18_reference.main(sys.argv[2], "--write-summary" in sys.argv[3:],
                                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                             "onnx", "resnet18_ref.json"))
        return
    if len(sys.argv) > 2 and sys.argv[1] in TWIN_MODULES:  # a twin's export and PyTorch reference, at test time
        importlib.import_module(TWIN_MODULES[sys.argv[1]]).main(sys.argv[2])
        return
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                                   "onnx")
    os.makedirs(os.path.join(out_dir, "bad"), exist_ok=True)
    good = {"mlp": mlp(), "cnn": cnn(), "tiny_mlp": tiny_mlp(), "small_unet": small_unet()}
    good["squash_mlp"] = squash_mlp()
    good["arith_mlp"] = arith_mlp()
    for name, m in good.items():
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out_dir, f"{name}.onnx"))
        write_sums(m, os.path.join(out_dir, f"{name}.sums"))
    for name, data in layout_models(good["cnn"]).items():
        with open(os.path.join(out_dir, f"{name}.onnx"), "wb") as f:
            f.write(data)
    for name, data in bad_models(good["cnn"]).items():
        with open(os.path.join(out_dir, "bad", f"{name}.onnx"), "wb") as f:
            f.write(data)
    export_torch(out_dir)


if __name__ == "__main__":
    main()
