#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/NAME/corpus/): small valid inputs and slightly broken
ones. The files are committed; rerun this after changing a target's input format, then commit what changed.

  usage: make_corpus.py MAKE_SEEDS MNIST_DIR
    MAKE_SEEDS  the built tests/fuzz/make_seeds.c (build/tests/fuzz/fuzz_make_seeds): the valid weights and
                state files, written by the library with the fuzz targets' own trainer; beside it
                fuzz_make_jpeg_seeds (tests/fuzz/make_jpeg_seeds.c), the valid JPEG files
    MNIST_DIR   the MNIST IDX files (data/mnist): a few real images and labels

Regression inputs (regress-*, inputs that once found a defect) are kept: only seed-* files are rewritten.
Inputs of several files (idx, png) are parts of a 2-byte little-endian length and the bytes
(tests/fuzz/fuzz_util.h)."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def corpus(target):
    d = os.path.join(HERE, target, "corpus")
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if name.startswith("seed-"):
            os.remove(os.path.join(d, name))
    return d


def put(d, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def parts(*files):
    return b"".join(struct.pack("<H", len(f)) + f for f in files)


# ---- model files ------------------------------------------------------------------------------------------

SMALL_MODELS = {
    "mlp": """[model]
name = tiny-mlp
input = image 1 4 4
[flat]
type = flatten
[fc1]
type = linear
out = 8
[act]
type = relu
[drop]
type = dropout
p = 0.25
[fc2]
type = linear
out = 3
init_scale = 0.5
[loss]
type = softmax_cross_entropy
""",
    "cnn": """[model]
input = image 3 8 8
[conv1]
type = conv2d
out_channels = 4
kernel = 3
stride = 1
padding = 1
[bn1]
type = batchnorm2d
eps = 1e-5
momentum = 0.1
[relu1]
type = relu
[pool1]
type = maxpool2d
kernel = 2
[conv2]
type = conv2d
out_channels = 4
kernel = 3
padding = 1
groups = 2
[gn]
type = groupnorm
groups = 2
[res]
type = add
inputs = pool1, gn
[gap]
type = global_avgpool
[fc]
type = linear
out = 5
[loss]
type = softmax_cross_entropy
""",
    "unet": """[model]
name = tiny-unet
input = image 1 8 8
[c1]
type = conv2d
out_channels = 2
kernel = 3
padding = 1
[r1]
type = relu
[down]
type = maxpool2d
kernel = 2
stride = 2
[c2]
type = conv2d
out_channels = 4
kernel = 3
padding = 1
[g2]
type = gelu
[up]
type = conv_transpose2d
out_channels = 2
kernel = 2
stride = 2
[cat]
type = concat
inputs = r1, up
[head]
type = conv2d
out_channels = 2
kernel = 1
[loss]
type = softmax_cross_entropy
""",
    "gpt": """[model]
name = tiny-gpt
input = tokens 8
[wte]
type = embedding
vocab = 16
dim = 8
[wpe]
type = position_embedding
max_len = 8
[ln1]
type = layernorm
eps = 1e-5
[qkv]
type = linear
out = 24
[attn]
type = self_attention
heads = 2
causal = true
[proj]
type = linear
out = 8
init_scale = 0.354
[add1]
type = add
inputs = wpe, proj
[lnf]
type = layernorm
[head]
type = linear_tied
embedding = wte
[loss]
type = softmax_cross_entropy
""",
}

BROKEN_MODELS = {
    "empty": "",
    "comment-only": "; nothing here\n# nor here\n",
    "no-model-section": "[fc]\ntype = linear\nout = 3\n",
    "bad-input": "[model]\ninput = picture 1 2 3\n[loss]\ntype = softmax_cross_entropy\n",
    "unknown-type": "[model]\ninput = image 1 2 2\n[a]\ntype = conv3d\n[loss]\ntype = softmax_cross_entropy\n",
    "unknown-key": "[model]\ninput = image 1 4 4\n[c]\ntype = conv2d\nout_channels = 2\nkernel = 3\nstrides = 2\n"
                   "[f]\ntype = flatten\n[loss]\ntype = softmax_cross_entropy\n",
    "stride-zero": "[model]\ninput = image 1 4 4\n[p]\ntype = maxpool2d\nkernel = 2\nstride = 0\n"
                   "[f]\ntype = flatten\n[loss]\ntype = softmax_cross_entropy\n",
    "hex-float": "[model]\ninput = image 1 2 2\n[f]\ntype = flatten\n[d]\ntype = dropout\np = 0x1p-3\n"
                 "[loss]\ntype = softmax_cross_entropy\n",
    "forward-ref": "[model]\ninput = image 1 2 2\n[a]\ntype = relu\ninput = b\n[b]\ntype = flatten\n"
                   "[loss]\ntype = softmax_cross_entropy\n",
    "duplicate": "[model]\ninput = tokens 4\n[a]\ntype = embedding\nvocab = 4\ndim = 2\n[a]\ntype = relu\n"
                 "[loss]\ntype = softmax_cross_entropy\n",
    "no-loss": "[model]\ninput = image 1 2 2\n[f]\ntype = flatten\n[l]\ntype = linear\nout = 2\n",
    "after-loss": "[model]\ninput = image 1 2 2\n[f]\ntype = flatten\n[loss]\ntype = softmax_cross_entropy\n"
                  "[r]\ntype = relu\n",
    "unread": "[model]\ninput = image 1 2 2\n[a]\ntype = relu\n[f]\ntype = flatten\ninput = input\n"
              "[loss]\ntype = softmax_cross_entropy\n",
    "continued": "[model]\ninput = image 1 2 2\n[f]\ntype = flatten\n  more = 1\n[loss]\ntype = softmax_cross_entropy\n",
    "huge": "[model]\ninput = image 4096 4096 4096\n[c]\ntype = conv2d\nout_channels = 4096\nkernel = 4096\n"
            "[f]\ntype = flatten\n[l]\ntype = linear\nout = 18446744073709551615\n[loss]\ntype = softmax_cross_entropy\n",
    "shape-mismatch": "[model]\ninput = image 1 4 4\n[l]\ntype = linear\nout = 3\n[loss]\ntype = softmax_cross_entropy\n",
    "attention-heads": "[model]\ninput = tokens 4\n[e]\ntype = embedding\nvocab = 8\ndim = 6\n[q]\ntype = linear\nout = 18\n"
                       "[a]\ntype = self_attention\nheads = 4\n[h]\ntype = linear\nout = 8\n[loss]\ntype = softmax_cross_entropy\n",
    "utf8-bom-crlf": "\ufeff[model]\r\ninput = image 1 2 2\r\n[f]\r\ntype = flatten\r\n[loss]\r\ntype = softmax_cross_entropy\r\n",
}


def model_file():
    d = corpus("model_file")
    for name, text in SMALL_MODELS.items():
        put(d, name + ".ini", text)
    # every shipped model: the largest plans are the slowest inputs, and must run inside the target's timeout
    for name in sorted(os.listdir(os.path.join(ROOT, "models"))):
        if name.endswith(".ini"):
            with open(os.path.join(ROOT, "models", name), "rb") as f:
                put(d, "zoo-" + name, f.read())
    for name, text in BROKEN_MODELS.items():
        put(d, "bad-" + name + ".ini", text)


# ---- weights and states -----------------------------------------------------------------------------------

def split_safetensors(data):
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def join_safetensors(header, body):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + body


def weights_variants(valid):
    """Valid, then one defect each (the targets recompute snug's checksum, so edits reach the checks)."""
    header, body = split_safetensors(valid)
    names = [k for k in header if k != "__metadata__"]
    first = names[0]
    out = {"valid": valid, "truncated": valid[:len(valid) - 7], "header-only": valid[:8 + struct.unpack("<Q", valid[:8])[0]],
           "length-too-large": struct.pack("<Q", len(valid)) + valid[8:], "length-one": struct.pack("<Q", 1) + valid[8:]}
    h = json.loads(json.dumps(header))
    h[first]["dtype"] = "F16"
    out["dtype-f16"] = join_safetensors(h, body)
    h = json.loads(json.dumps(header))
    h[first]["shape"] = h[first]["shape"][::-1] + [1]
    out["shape-rank"] = join_safetensors(h, body)
    h = json.loads(json.dumps(header))
    del h[names[-1]]
    out["missing-tensor"] = join_safetensors(h, body)
    h = json.loads(json.dumps(header))
    h["extra.weight"] = dict(h[first])
    out["overlap"] = join_safetensors(h, body)
    h = json.loads(json.dumps(header))
    h[first]["data_offsets"] = [h[first]["data_offsets"][0] + 4, h[first]["data_offsets"][1] + 4]
    out["offsets-shifted"] = join_safetensors(h, body)
    nan = bytearray(body)
    begin = header[first]["data_offsets"][0]
    nan[begin:begin + 4] = struct.pack("<f", float("nan"))
    out["nan"] = join_safetensors(header, bytes(nan))
    out["not-json"] = struct.pack("<Q", 8) + b"{\"a\":[1," + body
    out["not-object"] = struct.pack("<Q", 8) + b"[1,2,3] " + body
    return out


def weights_and_states(make_seeds):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([make_seeds, tmp], check=True)
        with open(os.path.join(tmp, "weights.safetensors"), "rb") as f:
            weights = f.read()
        states = {}
        for name in sorted(os.listdir(tmp)):
            if name.startswith("state-"):
                with open(os.path.join(tmp, name), "rb") as f:
                    states[name] = f.read()
    d = corpus("weights")
    for name, data in weights_variants(weights).items():
        put(d, name + ".safetensors", data)
    newest = states[sorted(states)[-1]]
    put(d, "state.safetensors", newest)  # a state file is also a weights file

    d = corpus("state")
    for name, data in states.items():
        put(d, name, data)
    put(d, "weights-not-state.safetensors", weights)
    header, body = split_safetensors(newest)
    meta = header["__metadata__"]
    run = json.loads(meta["snug_state"])
    for label, edit in (
            ("version", lambda r: r.__setitem__("version", 2)),
            ("batch", lambda r: r.__setitem__("batch", 5)),
            ("seed", lambda r: r["run"].__setitem__("seed", "8")),
            ("adamw", lambda r: r["run"]["optim"].__setitem__("kind", "adamw")),
            ("window-far", lambda r: r["counters"].__setitem__("window", 1000)),
            ("epoch-far", lambda r: r["counters"].__setitem__("epoch", 9007199254740991)),
            ("step-far", lambda r: r["counters"].__setitem__("step", 9007199254740991)),
            ("model", lambda r: r.__setitem__("model", "other")),
            ("counters-missing", lambda r: r.pop("counters"))):
        r = json.loads(json.dumps(run))
        edit(r)
        h = json.loads(json.dumps(header))
        h["__metadata__"]["snug_state"] = json.dumps(r, separators=(",", ":"))
        put(d, "edit-" + label + ".safetensors", join_safetensors(h, body))
    h = json.loads(json.dumps(header))
    del h["__metadata__"]["snug_state"]
    put(d, "edit-no-state-key.safetensors", join_safetensors(h, body))
    h = json.loads(json.dumps(header))
    del h[[k for k in h if k.startswith("optim.")][0]]
    put(d, "edit-optim-missing.safetensors", join_safetensors(h, body))
    put(d, "truncated.safetensors", newest[:len(newest) // 2])


# ---- MNIST IDX --------------------------------------------------------------------------------------------

def idx(mnist):
    with open(os.path.join(mnist, "t10k-images-idx3-ubyte"), "rb") as f:
        images = f.read(16 + 3 * 784)
    with open(os.path.join(mnist, "t10k-labels-idx1-ubyte"), "rb") as f:
        labels = f.read(8 + 3)
    pixels = images[16:]
    imgs = struct.pack(">IIII", 0x803, 3, 28, 28) + pixels
    labs = struct.pack(">II", 0x801, 3) + labels[8:]
    small = struct.pack(">IIII", 0x803, 4, 5, 3) + bytes(range(60))
    small_labels = struct.pack(">II", 0x801, 4) + bytes([0, 9, 3, 7])
    d = corpus("idx")
    put(d, "mnist-3", parts(imgs, labs))
    put(d, "small-4x5x3", parts(small, small_labels))
    put(d, "swapped", parts(labs, imgs))
    put(d, "count-mismatch", parts(imgs, struct.pack(">II", 0x801, 2) + labels[8:10]))
    put(d, "label-10", parts(small, struct.pack(">II", 0x801, 4) + bytes([0, 10, 3, 7])))
    put(d, "truncated", parts(imgs[:-5], labs))
    put(d, "trailing", parts(imgs + b"\0", labs))
    put(d, "type-float", parts(struct.pack(">IIII", 0x0D03, 4, 5, 3) + bytes(60), small_labels))
    put(d, "dims-overflow", parts(struct.pack(">IIII", 0x803, 0xffffffff, 0xffffffff, 0xffffffff), small_labels))
    put(d, "zero-dim", parts(struct.pack(">IIII", 0x803, 4, 0, 3), small_labels))
    put(d, "gzip", parts(b"\x1f\x8b\x08\x00" + bytes(20), small_labels))
    put(d, "empty", parts(b"", b""))


# ---- PNG images and masks ---------------------------------------------------------------------------------

def png(width, height, bit_depth, color_type, rows, palette=None, trns=None, interlace=0):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, interlace))
    if palette:
        out += chunk(b"PLTE", palette)
    if trns:
        out += chunk(b"tRNS", trns)
    raw = b"".join(b"\0" + r for r in rows)
    return out + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def gray8(w, h, f):
    return png(w, h, 8, 0, [bytes(f(x, y) & 255 for x in range(w)) for y in range(h)])


def png_corpus():
    d = corpus("png")
    w, h = 6, 5
    image = gray8(w, h, lambda x, y: 40 * x + 7 * y)
    mask = gray8(w, h, lambda x, y: 1 if x > y else (255 if x == y else 0))
    mask3 = gray8(w, h, lambda x, y: (x + y) % 3)
    rgb = png(w, h, 8, 2, [b"".join(bytes((x * 40 % 256, y * 50 % 256, 90)) for x in range(w)) for y in range(h)])
    rgba16 = png(w, h, 16, 6, [b"".join(struct.pack(">HHHH", x * 9000, y * 9000, 1000, 65535) for x in range(w))
                               for y in range(h)])
    pal_img = png(w, h, 8, 3, [bytes((x + y) % 4 for x in range(w)) for y in range(h)],
                  palette=bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255]), trns=bytes([255, 128]))
    pal_mask = png(w, h, 8, 3, [bytes((x * y) % 2 for x in range(w)) for y in range(h)],
                   palette=bytes([0, 0, 0, 255, 255, 255]))
    gray2 = png(w, h, 2, 0, [bytes([0b00011011, 0b11100100]) for _ in range(h)])
    interlaced = png(w, h, 8, 0, [bytes((x * y * 9) % 256 for x in range(w)) for y in range(h)], interlace=1)
    gray_alpha = png(w, h, 8, 4, [bytes(v for x in range(w) for v in (x * 30, 200)) for y in range(h)])
    put(d, "gray-pair", parts(image, mask))
    put(d, "two-pairs", parts(image, mask, interlaced, mask3))
    put(d, "rgb", parts(rgb, mask3))
    put(d, "rgba16", parts(rgba16, mask))
    put(d, "palette", parts(pal_img, pal_mask))
    put(d, "gray2-alpha", parts(gray2, mask, gray_alpha, mask))
    put(d, "mask-missing", parts(image))
    put(d, "size-mismatch", parts(image, mask, gray8(w + 1, h, lambda x, y: x), mask))
    put(d, "mask-size", parts(image, gray8(w, h + 1, lambda x, y: 1)))
    put(d, "mask-class0", parts(image, gray8(w, h, lambda x, y: 0)))
    put(d, "mask-rgb", parts(image, rgb))
    put(d, "truncated", parts(image[:len(image) - 20], mask))
    put(d, "not-png", parts(b"GIF89a" + bytes(30), mask))
    bomb = png(60000, 60000, 8, 0, [])
    put(d, "bomb-header", parts(bomb[:33] + bomb[-12:], mask))


# ---- text -------------------------------------------------------------------------------------------------

def sof_offset(jpeg):
    """Where the frame header (SOF0, SOF2 or SOF9) of a JPEG starts."""
    for i in range(2, len(jpeg) - 1):
        if jpeg[i] == 0xFF and jpeg[i + 1] in (0xC0, 0xC2, 0xC9):
            return i
    raise ValueError("no frame header")


def with_size(jpeg, height, width):
    at = sof_offset(jpeg) + 5
    return jpeg[:at] + struct.pack(">HH", height, width) + jpeg[at + 4:]


def jpeg_corpus(make_jpeg_seeds):
    """Tiny valid JPEGs written by libjpeg (make_jpeg_seeds.c), and broken variants: cut short, a bit flipped in
    the entropy-coded data, sizes declared larger than the data (a bomb's header), no frame at all."""
    d = corpus("jpeg")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([make_jpeg_seeds, tmp], check=True)
        valid = {}
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                valid[name[:-len(".jpg")]] = f.read()
    for name, data in valid.items():
        put(d, name, data)
    rgb, gray_prog = valid["rgb-8x8"], valid["gray-progressive-9x13"]
    put(d, "cut-half", rgb[:len(rgb) // 2])
    put(d, "cut-before-scan", rgb[:sof_offset(rgb) + 19])
    flipped = bytearray(rgb)
    flipped[-20] ^= 0x10
    put(d, "flipped-bit", bytes(flipped))
    put(d, "declares-12000x12000-gray", with_size(valid["gray-8x8"], 12000, 12000))
    put(d, "declares-12000x12000-progressive", with_size(gray_prog, 12000, 12000))
    put(d, "declares-8192x8192-progressive", with_size(gray_prog, 8192, 8192))
    put(d, "declares-0x8", with_size(rgb, 0, 8))
    put(d, "soi-only", b"\xff\xd8\xff\xd9")
    put(d, "not-jpeg", b"GIF89a\x01\x00\x01\x00")


def text_corpus():
    d = corpus("text")
    with open(os.path.join(ROOT, "README.md"), "rb") as f:
        readme = f.read(1500)
    put(d, "readme-ctx16", bytes([15, 26]) + readme)
    put(d, "short-ctx64", bytes([63, 0]) + b"hello, world\n")
    put(d, "one-byte", bytes([0, 0]) + b"x")
    put(d, "empty", bytes([3, 25]))
    put(d, "binary", bytes([7, 255]) + bytes(range(256)))
    put(d, "exact-window", bytes([4, 128]) + b"abcdefghij")


# ---- csv --------------------------------------------------------------------------------------------------

def csv_corpus():
    d = corpus("csv")
    iris = b"sepal_length,sepal_width,species\n5.1,3.5,setosa\n7.0,3.2,versicolor\n6.3,3.3,virginica\n"
    put(d, "names-standardised", bytes([1]) + parts(iris, b"sepal_length,sepal_width,species\n5.0,3.0,setosa\n"))
    put(d, "numbers", bytes([0]) + parts(b"a,b,y\n1,2,0\n3,4e1,2\n-5.5,0x10,1\n", b"a,b,y\n1,1,1\n"))
    put(d, "label-by-name", bytes([3]) + parts(b"a,y,b\n1,cat,2\n3,dog,4\n", b"a,y,b\n1,dog,1\n"))
    put(d, "crlf-bom-quotes", bytes([1]) + parts(b"\xef\xbb\xbf\"a, b\",\"say \"\"hi\"\"\", y\r\n1,2,0\r\n3,4,1\r\n\r\n",
                                                b"\"a, b\",\"say \"\"hi\"\"\",y\r\n1,2,3\r\n"))
    put(d, "unseen-class", bytes([0]) + parts(b"x,y\n1,a\n2,b\n", b"x,y\n1,c\n"))
    put(d, "missing", bytes([1]) + parts(b"a,b,y\n1,,0\n2,NA,1\n", b""))
    put(d, "ragged", bytes([0]) + parts(b"a,b,y\n1,2\n1,2,3,4\n", b"a,b,y\n\n1,2,0\n"))
    put(d, "constant-column", bytes([1]) + parts(b"a,b,y\n1,7,0\n1,8,1\n1,9,0\n", b"a,b,y\n2,1e30,0\n"))
    put(d, "standardised-overflow", bytes([1]) + parts(b"a,b,y\n1,1,0\n1,1.000001,1\n", b"a,b,y\n2,1e38,0\n"))


# ---- flags ------------------------------------------------------------------------------------------------

def argv(command, *args):
    return bytes([command]) + b"\0".join(a.encode() for a in args)


def flags_corpus():
    d = corpus("flags")
    put(d, "train-demo", argv(0, "--model", "cnn", "--data", "mnist", "--batch", "64", "--micro-batch", "16", "--mem",
                              "64MiB", "--epochs", "1", "--optim", "sgd", "--lr", "0.05", "--momentum", "0.9",
                              "--schedule", "cosine", "--warmup", "100", "--seed", "1"))
    put(d, "train-state", argv(0, "--state", "runs/x", "--state-every", "100", "--state-every-time", "10m",
                               "--checkpoint", "every:4", "--clip", "1.5", "--data", "text:file.txt"))
    put(d, "train-eq", argv(0, "--mem=1.5GiB", "--micro-batch=auto", "--checkpoint=auto", "--threads=2"))
    put(d, "plan-json", argv(1, "--model", "gpt", "--batch", "8", "--mem", "500MB", "--json", "--layers",
                             "--timeline", "t.svg"))
    put(d, "eval", argv(2, "--model", "models/cnn.ini", "--weights", "w.safetensors", "--data", "segmentation:dir"))
    put(d, "sizes", argv(1, "1", "1.5", "0x10", "inf", "1e3KiB", "2 GiB", "-1MiB", "18446744073709551616",
                         "16TB", "5e", "none", "cheap", "sqrt", "every:0", "every:18446744073709551615", "auto"))
    put(d, "help", argv(0, "--help", "--bogus"))
    put(d, "bad-numbers", argv(0, "--batch", "0x40", "--lr", "nan", "--epochs", "-1", "--seed", "-1",
                               "--state-every-time", "1e308h"))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    make_seeds, mnist = sys.argv[1], sys.argv[2]
    make_jpeg_seeds = os.path.join(os.path.dirname(make_seeds), "fuzz_make_jpeg_seeds")
    model_file()
    weights_and_states(make_seeds)
    idx(mnist)
    png_corpus()
    jpeg_corpus(make_jpeg_seeds)
    text_corpus()
    csv_corpus()
    flags_corpus()


if __name__ == "__main__":
    main()
