"""The exceptions of snug: one per status of the library (snug.h's snug_status), each carrying the library's
message (what failed, where, and what to do)."""

from . import _snug


class Error(Exception):
    """A failure reported by the snug library; str(e) is its message."""


class ArgumentError(Error, ValueError):
    """A bad argument: a zero size, a micro-batch larger than the batch, an unknown name."""


class ShapeError(Error, ValueError):
    """Shapes that do not fit together (a data set's samples and the model's input)."""


class OutOfMemory(Error, MemoryError):
    """The plan does not fit the memory budget or the machine, or the system refused memory."""


class OutOfBudget(OutOfMemory):
    """A plan request that does not fit its budget. `shortfall` holds the figures of the way out: `needed`,
    `bytes` (per category), `budget`, `fixed` (parameters, gradients and optimizer state, which no micro-batch
    lowers), `largest_micro_batch` (the largest that fits with the policy asked for; 0: none),
    `largest_with_recompute` (with checkpointing), `smallest_budget` (the least budget any plan fits)."""

    shortfall = {}

    @property
    def smallest_budget(self):
        return self.shortfall.get("smallest_budget", 0)

    @property
    def largest_micro_batch(self):
        return self.shortfall.get("largest_micro_batch", 0)


class FileError(Error, OSError):
    """A file that could not be opened, read or written."""


class FormatError(Error, ValueError):
    """A malformed file: wrong magic, truncated, inconsistent dimensions."""


class NonFiniteError(Error, ArithmeticError):
    """The loss or the gradients stayed NaN or infinite."""


class SizeOverflow(Error, OverflowError):
    """A size computation overflowed."""


class Interrupted(Error):
    """A run stopped on request before its end (Trainer.fit raises KeyboardInterrupt for Ctrl-C instead)."""


# In snug_status's order (SNUG_E_ARG ... SNUG_E_INTERRUPTED), by the library's status names.
_BY_STATUS = [ArgumentError, ShapeError, OutOfMemory, FileError, FormatError, NonFiniteError, SizeOverflow,
              Interrupted]
_snug._set_errors(dict(zip(_snug.status_names(), _BY_STATUS)))
_snug._set_out_of_budget(OutOfBudget)
