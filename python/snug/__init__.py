"""snug: training inside a memory budget, from Python.

    import snug
    model = snug.Model("cnn")
    plan = snug.plan(model, batch=64, mem="64MiB")
    trainer = snug.Trainer(model, plan, optimizer=snug.SGD(lr=0.05, momentum=0.9))
    trainer.fit(snug.data.arrays(x, y), epochs=1)

A thin layer over the C library (include/snug.h): the same plan, the same accumulation, the same bits as the
`snug` command. See docs/python.md.
"""

from . import _snug
from . import data
from .errors import (Error, ArgumentError, ShapeError, OutOfMemory, OutOfBudget, FileError, FormatError,
                     NonFiniteError, SizeOverflow, Interrupted)
from .model import Model, models
from .optim import SGD, AdamW, Cosine, Constant
from .planning import Plan, plan
from .trainer import History, Trainer

__version__ = _snug.version

set_threads = _snug.set_threads
system_info = _snug.system_info
format_bytes = _snug.format_bytes
parse_size = _snug.parse_size

__all__ = ["Model", "models", "plan", "Plan", "Trainer", "History", "SGD", "AdamW", "Cosine", "Constant", "data",
           "Error", "ArgumentError", "ShapeError", "OutOfMemory", "OutOfBudget", "FileError", "FormatError",
           "NonFiniteError", "SizeOverflow", "Interrupted", "set_threads", "system_info", "format_bytes",
           "parse_size"]
