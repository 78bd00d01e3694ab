"""snug.plan: what one optimizer step needs, every byte by category, for a batch within a memory budget."""

import json

from . import _snug
from .optim import SGD


def _bytes(mem):
    if mem is None:
        return 0
    if isinstance(mem, str):
        return _snug.parse_size(mem)
    if int(mem) <= 0:
        raise ValueError(f"mem={mem!r}: a budget is a positive number of bytes or a size such as '64MiB'")
    return int(mem)


class Plan:
    """A plan: made by snug.plan. Its figures: `micro_batch`, `micro_batches` (forward/backward passes per
    optimizer step), `checkpoint` (the policy, with what auto resolved to), `bytes` ({category: bytes} of params,
    grads, optim, activations, workspace, data), `peak` (every byte it reserves: the run's memory), `table` (every
    candidate `snug plan` shows, as dicts, the chosen one marked "chosen"), to_dict() (`snug plan --json`'s
    document) and str(plan) (`snug plan`'s report)."""

    def __init__(self, c_plan, model, optimizer, data):
        self._plan = c_plan
        self.model = model
        self.optimizer = optimizer
        self.data = data
        self._summary = c_plan.summary()

    micro_batch = property(lambda self: self._summary["micro_batch"])
    micro_batches = property(lambda self: self._summary["micro_batches"])
    batch = property(lambda self: self._summary["batch"])
    checkpoint = property(lambda self: self._summary["checkpoint"])
    precision = property(lambda self: self._summary["precision"])
    linear_product = property(lambda self: self._summary["linear_product"])
    bytes = property(lambda self: dict(self._summary["bytes"]))
    peak = property(lambda self: self._summary["total"])
    budget = property(lambda self: self._summary["budget"])

    @property
    def summary(self):
        """Every figure of the chosen plan (snug_plan_summary) as a dict."""
        return dict(self._summary)

    @property
    def table(self):
        rows, chosen = self._plan.candidates()
        for i, row in enumerate(rows):
            row["chosen"] = i == chosen
        return rows

    def to_dict(self, buffers=False):
        """`snug plan --json`'s document: the candidates, the chosen plan, its baseline, (buffers: every buffer)."""
        return json.loads(self._plan.json(self.model.source, buffers))

    def report(self, buffers=False):
        """`snug plan`'s report (with buffers: every buffer of the chosen plan, as --layers prints them)."""
        return self._plan.text(self.model.source, buffers)

    def timeline(self, path):
        """Writes the memory timeline of one optimizer step to path (.svg picture or .csv table)."""
        self._plan.timeline(self.model.source, str(path))

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"<snug.Plan {self.model.name}: batch {self.batch} = {self.micro_batches} x {self.micro_batch}, "
                f"checkpoint {self.checkpoint}, {_snug.format_bytes(self.peak)}>")


def plan(model, batch=64, mem=None, micro_batch="auto", checkpoint=None, precision="fp32", optimizer=None,
         data=None, products="auto"):
    """Plans `model` (a snug.Model) for a global batch of `batch` samples within `mem` (bytes, or "64MiB",
    "1.5GiB"; None: no budget), as `snug train` plans: micro_batch "auto" (the default with a budget; without one,
    the whole batch in one pass) or a number; checkpoint None (auto with an automatic micro-batch, else none),
    "auto", "none", "sqrt", "every:N" or "cheap"; precision "fp32" or "bf16"; the optimizer whose state is
    planned (snug.SGD() by default); data: the training data set the run reads (its bytes are counted, and a
    batch larger than it takes it whole), or None; products: what multiplies the linear layers, "auto" (snug's
    own where they pay on this CPU), "blas" or "snug" (snug's own wherever it has one), as SNUG_GEMM for the
    snug command; the plan's `linear_product` says what it took ("snug bf16", "snug fp32" or "blas").

    Raises snug.OutOfBudget when nothing fits (its `shortfall` says the smallest budget and the largest
    micro-batch that would), snug.ArgumentError for a bad request."""
    from .data import Dataset
    optimizer = optimizer or SGD()
    budget = _bytes(mem)
    if micro_batch == "auto":
        micro = 0 if budget else int(batch)
    else:
        micro = int(micro_batch)
        if micro <= 0:
            raise ValueError(f"micro_batch={micro_batch!r}: 'auto' or a number of samples >= 1")
    if data is not None and not isinstance(data, Dataset):
        raise TypeError("data must be a snug.data data set (snug.data.arrays, mnist, ...), or None")
    c_data = data._ds if data is not None else None
    prefetch = data.read_ahead if data is not None else -1
    c_plan = _snug.plan(model._graph, int(batch), micro, checkpoint, budget, precision, optimizer.config(), c_data,
                        prefetch, products)
    p = Plan(c_plan, model, optimizer, data)
    # what Trainer.resume plans again with (the state stores the batch, the optimizer and the precision too)
    p.args = dict(mem=mem, micro_batch=micro_batch, checkpoint=checkpoint, precision=precision, products=products)
    return p
