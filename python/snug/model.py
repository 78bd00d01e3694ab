"""snug.Model: a built-in model of the zoo or a model file (docs/model-files.md)."""

from . import _snug


class Model:
    """Model(name_or_path, classes=None): a zoo name ("mlp", "cnn", "resnet20", "gpt", ...; snug.models() lists
    them) or a model file (a path that contains '/' or ends in .ini). `classes` replaces the class count of the
    layer the loss reads. The graph is static: shapes are per sample, the batch dimension is the plan's.

    Raises snug.ArgumentError for an unknown name, snug.FileError / snug.FormatError for a model file that cannot be
    read, with the file, the line and the layer."""

    def __init__(self, name_or_path, classes=None):
        self.source = str(name_or_path)
        self.classes = classes
        self._graph = _snug.Graph(self.source, int(classes or 0))
        self._trainer = None  # the Trainer most recently made for this model: parameters() reads its weights

    @property
    def name(self):
        """The graph's name: the zoo name, or the model file's [model] name."""
        return self._graph.name

    @property
    def input_shape(self):
        """The per-sample input shape, e.g. (1, 28, 28)."""
        return self._graph.input_shape

    @property
    def output_shape(self):
        """The per-sample logits shape the loss reads: (classes,), (T, classes) or (classes, H, W)."""
        return self._graph.output_shape

    def parameter_shapes(self):
        """{name: shape} of every parameter and buffer, in graph order, under PyTorch's state_dict names."""
        return {name: shape for name, shape, _ in self._graph.params()}

    def parameters(self, seed=1):
        """{name: numpy.ndarray} under PyTorch's state_dict names ("conv1.weight", "bn1.running_mean"): the
        weights of the Trainer most recently made for this model, or else the initialisation a Trainer with `seed`
        starts from (PyTorch's default initialisers, drawn from the seed). Copies."""
        if self._trainer is not None and self._trainer() is not None:
            return self._trainer().state_dict()
        from .planning import plan
        from .trainer import Trainer
        from .optim import SGD
        return Trainer(self, plan(self, batch=1, optimizer=SGD(momentum=0)), optimizer=SGD(momentum=0),
                       seed=seed, _remember=False).state_dict()

    def summary(self):
        """The model in a few lines: its input, its logits, and each parameter with its shape and element count."""
        params = self._graph.params()
        total = sum(_numel(shape) for _, shape, _ in params)
        width = max([len(n) for n, _, _ in params] + [10])
        lines = [f"model {self.name}" + (f" (from {self.source})" if self.source != self.name else ""),
                 f"input {_dims(self.input_shape)} per sample, logits {_dims(self.output_shape)}"]
        for name, shape, trainable in params:
            note = "" if trainable else "  (buffer, not trained)"
            lines.append(f"  {name:<{width}}  {_dims(shape):<20} {_numel(shape):>12,}{note}")
        lines.append(f"{total:,} parameters and buffers ({_snug.format_bytes(4 * total)} as float32)")
        return "\n".join(lines)

    def __repr__(self):
        return f"snug.Model({self.source!r})"


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _dims(shape):
    return "x".join(str(d) for d in shape)


def models():
    """The built-in model names."""
    return _snug.model_names()
