"""Data sets: numpy arrays borrowed without a copy, the library's own readers (MNIST, image folders, CSV
tables), and any Python object with __len__ and __getitem__ (docs/python.md, "The data contract")."""

import numpy as np

from . import _snug


class Dataset:
    """A data set of the library. len(ds) samples of `sample_shape`, `classes` classes."""

    read_ahead = -1  # micro-batches read ahead by the library's thread; -1: as the library suits the data set

    def __init__(self, c_dataset, what):
        self._ds = c_dataset
        self.what = what

    def __len__(self):
        return self._ds.size()

    sample_shape = property(lambda self: self._ds.sample_shape)
    classes = property(lambda self: self._ds.classes)
    class_names = property(lambda self: self._ds.class_names)

    def subset(self, count):
        """`count` evenly spaced samples (for a quick evaluation on part of a held-out set); reads this one."""
        return Dataset(self._ds.subset(int(count)), f"{count} samples of {self.what}")

    def __repr__(self):
        return f"<snug data set {self.what}: {len(self)} samples of {self.sample_shape}, {self.classes} classes>"


def _refuse(name, a, dtype):
    kind = "a numpy array" if isinstance(a, np.ndarray) else type(a).__name__
    layout = "" if not isinstance(a, np.ndarray) else (
        f" of dtype {a.dtype}" + ("" if a.flags.c_contiguous else ", not C-contiguous"))
    raise TypeError(f"snug.data.arrays borrows {name} without copying it, so it must be a C-contiguous numpy array "
                    f"of {dtype}; {name} is {kind}{layout}. Convert it once (a copy): "
                    f"{name} = numpy.ascontiguousarray({name}, dtype=numpy.{dtype})")


def arrays(x, y, classes=None):
    """Borrows x (samples, *sample_shape) float32 and y (samples,) or (samples, targets per sample) int32,
    both C-contiguous, without copying them: the data set reads them where they are, and keeps a reference to
    both while it lives. Targets are class numbers in [0, classes) or -1 (ignored); classes defaults to
    y.max() + 1. Other dtypes or layouts are refused with the conversion to make (one copy, yours)."""
    for name, a, dtype in (("x", x, "float32"), ("y", y, "int32")):
        if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dtype) or not a.flags.c_contiguous:
            _refuse(name, a, dtype)
    if x.ndim < 2:
        raise ValueError(f"x has shape {x.shape}: samples first, then each sample's shape, e.g. (n, 1, 28, 28)")
    if classes is None:
        classes = int(y.max()) + 1 if y.size else 1
    return Dataset(_snug.dataset_arrays(x, y, int(classes)), f"arrays {x.shape} float32")


def mnist(dir="data/mnist", train=True, pad=0):
    """The MNIST IDX files in dir: train-* (train=True) or t10k-*, normalised as torchvision does; pad: pixels
    of background around each image (2 gives the 1x32x32 of resnet20)."""
    return Dataset(_snug.dataset_mnist(str(dir), bool(train), int(pad)), f"MNIST {'train' if train else 't10k'}")


def images(dir, shape, classes=None):
    """Labelled PNG/JPEG images, one folder per class (dir/CLASS/NAME.png), resized and centre-cropped to
    shape (C, H, W), normalised by their own statistics; classes: the names to expect, in order."""
    return Dataset(_snug.dataset_images(str(dir), tuple(shape), classes), f"images in {dir}")


def csv(path, label=None, standardise=True, stats_from=None):
    """A CSV table: a header row, one sample per row, the label column (`label`, else the last) holding class
    numbers or names; features standardised (by stats_from's statistics, a training table, when given). A model
    reads it as input `image F 1 1`."""
    return Dataset(_snug.dataset_csv(str(path), label, bool(standardise),
                                     stats_from._ds if stats_from is not None else None), f"table {path}")


class _Fetch:
    """fetch(indices) -> (inputs float32, targets int32) of a micro-batch, over obj[i] -> (x, y)."""

    def __init__(self, obj, numel, per_sample):
        self.obj, self.numel, self.per_sample = obj, numel, per_sample

    def __call__(self, indices):
        xs = np.empty((len(indices), self.numel), np.float32)
        ys = np.empty((len(indices), self.per_sample), np.int32)
        for row, i in enumerate(indices):
            x, y = self.obj[i]
            xs[row] = np.asarray(x, np.float32).reshape(-1)
            ys[row] = np.asarray(y, np.int32).reshape(-1)
        return xs, ys


def sequence(obj, sample_shape=None, classes=None, read_ahead=2):
    """Any object with __len__ and __getitem__(i) -> (x, y): x anything numpy reads as sample_shape floats
    (default: the shape of obj[0][0]), y a class number or an array of targets. The library reads it through
    its callback data set, `read_ahead` micro-batches ahead on its own thread (0: in the step), which takes the
    GIL only inside the call to obj[i]. classes defaults to the largest target of the first 1,000 samples + 1."""
    n = len(obj)
    if n == 0:
        raise ValueError("the data set is empty")
    x0, y0 = obj[0]
    shape = tuple(sample_shape) if sample_shape is not None else np.shape(x0)
    if not shape:
        shape = (1,)
    per_sample = int(np.size(y0))
    if classes is None:
        classes = 1 + max(int(np.max(obj[i][1])) for i in range(min(n, 1000)))
    numel = int(np.prod(shape))
    ds = Dataset(_snug.dataset_source(_Fetch(obj, numel, per_sample), n, shape, per_sample, int(classes)),
                 f"{type(obj).__name__}")
    ds.read_ahead = int(read_ahead)
    return ds


def wrap(data):
    """A snug data set as is; a pair of arrays (x, y) borrowed; any other sequence through sequence()."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(a, np.ndarray) for a in data):
        return arrays(*data)
    if hasattr(data, "__len__") and hasattr(data, "__getitem__"):
        return sequence(data)
    raise TypeError(f"{type(data).__name__} is not a data set: give snug.data.arrays(x, y), a pair of numpy "
                    f"arrays (x, y), or an object with __len__ and __getitem__(i) -> (x, y)")
