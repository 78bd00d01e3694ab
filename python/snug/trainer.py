"""snug.Trainer: a plan's memory reserved, then optimizer steps with the GIL released (docs/python.md)."""

import json
import signal
import sys
import threading
import weakref

import numpy as np

from . import _snug
from .data import Dataset, arrays, wrap
from .optim import Constant, optimizer_from_config, schedule_from_config

_EXTRA_KEY = "snug-python"  # marks the state text this package writes (what resume needs to rebuild the run)


class History:
    """What a fit did: `steps` (a dict per optimizer step: step, epoch, loss, lr, grad_norm, skipped, items,
    samples_per_s, elapsed_s) and `evals` (a dict per evaluation: step, loss, accuracy, mean_iou, items); the
    columns as lists: history.loss, history.lr, history.grad_norm, history.accuracy."""

    def __init__(self, steps, evals):
        self.steps, self.evals = steps, evals

    loss = property(lambda self: [s["loss"] for s in self.steps])
    lr = property(lambda self: [s["lr"] for s in self.steps])
    grad_norm = property(lambda self: [s["grad_norm"] for s in self.steps])
    accuracy = property(lambda self: [e["accuracy"] for e in self.evals])

    def __len__(self):
        return len(self.steps)

    def __repr__(self):
        last = f", last loss {self.steps[-1]['loss']:.4f}" if self.steps else ""
        return f"<snug.History {len(self.steps)} steps, {len(self.evals)} evaluations{last}>"


class Trainer:
    """Trainer(model, plan, optimizer=plan's, schedule=snug.Constant(), clip=0, seed=1, shuffle=True,
    drop_last=False): reserves every byte of the plan (a step allocates nothing) and initialises the weights from
    the seed as PyTorch's default initialisers do. The optimizer must be the one the plan was made for (its
    state is planned). Use it from one thread at a time; its long calls release the GIL."""

    def __init__(self, model, plan, optimizer=None, schedule=None, clip=0.0, seed=1, shuffle=True, drop_last=False,
                 max_nonfinite=10, _remember=True):
        self.model, self.plan = model, plan
        self.optimizer = optimizer or plan.optimizer
        self.schedule = schedule or Constant()
        self.seed = int(seed)
        self._c = _snug.Trainer(plan._plan, self.optimizer.config(), self.schedule.config(), float(clip), self.seed,
                                bool(shuffle), bool(drop_last), int(max_nonfinite))
        self.history = None
        self._fit_length = None  # what a resumed run was fitting to: fit() without epochs or steps continues it
        self._plan_args = getattr(plan, "args", None)
        if _remember:
            model._trainer = weakref.ref(self)

    def fit(self, data, epochs=None, steps=None, eval_data=None, eval_every=0, progress=None, log=None, state=None,
            state_every=0, state_every_seconds=600, state_keep=2, callback=None):
        """Trains on data (snug.data.*, a pair of numpy arrays (x, y), or any object with __len__ and
        __getitem__(i) -> (x, y)) to `epochs` epochs or `steps` optimizer steps counted from the run's start (a
        resumed run continues to them; default 1 epoch). Every eval_every steps it scores eval_data. progress:
        None: a live line on a terminal; True/False; or a callable called after every step with its figures (a
        dict; return False to stop). log: a .jsonl or .csv file of every step and evaluation. state: a folder for
        the run's state, written every state_every steps or state_every_seconds, at the end, and on Ctrl-C.

        The steps run with the GIL released. Ctrl-C (SIGINT, on the main thread) finishes the step in progress,
        writes the state when there is a folder, and raises KeyboardInterrupt. Returns the History (also
        trainer.history)."""
        ds = wrap(data)
        ev = wrap(eval_data) if eval_data is not None else None
        if epochs is None and steps is None:
            epochs, steps = self._fit_length or (1, None)
        self._fit_length = (epochs, steps)
        if callable(progress):
            callback, progress = progress, False
        elif progress is None:
            progress = sys.stderr is not None and sys.stderr.isatty()
        catch = threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        extra = json.dumps({_EXTRA_KEY: 1, "model": self.model.source, "classes": self.model.classes,
                            "plan": self._plan_args, "epochs": epochs, "steps": steps})
        try:
            interrupted = self._c.fit(ds._ds, epochs=int(epochs or 0), steps=int(steps or 0),
                                      eval_data=ev._ds if ev else None, eval_every=int(eval_every),
                                      log=None if log is None else str(log), state=None if state is None else str(state),
                                      state_every=int(state_every), state_every_seconds=float(state_every_seconds),
                                      state_keep=int(state_keep), state_extra=extra, callback=callback,
                                      progress=bool(progress), catch_sigint=catch)
        finally:
            self.history = History(*self._c.history())
        if interrupted:
            last = self.history.steps[-1]["step"] if self.history.steps else 0
            raise KeyboardInterrupt(f"snug: training stopped after step {last}" +
                                    (f"; its state is in {state}" if state is not None else ""))
        return self.history

    def evaluate(self, data):
        """Scores data with the current weights (forward only, within the plan): {loss, accuracy, items, bits,
        mean_iou, foreground_iou}."""
        return self._c.evaluate(wrap(data)._ds)

    def predict(self, x):
        """The logits of every sample of x (a float32 array (n, *input_shape), or a snug data set), computed in
        micro-batches within the plan: an array (n, *model.output_shape)."""
        out_shape = tuple(self.model.output_shape)
        if isinstance(x, Dataset):
            ds = x
        else:
            x = np.ascontiguousarray(x, dtype=np.float32)
            if x.shape[1:] != tuple(self.model.input_shape):
                x = x.reshape((x.shape[0],) + tuple(self.model.input_shape))
            classes = out_shape[1] if len(out_shape) == 2 else out_shape[0]
            targets = int(np.prod(out_shape)) // classes
            ds = arrays(x, np.full((x.shape[0], targets), -1, np.int32), classes)
        out = np.empty((len(ds),) + out_shape, np.float32)
        self._c.predict(ds._ds, out)
        return out

    def state_dict(self):
        """{name: numpy.ndarray}: copies of every parameter and buffer under PyTorch's state_dict names and shapes,
        for torch.nn.Module.load_state_dict (after torch.from_numpy)."""
        shapes = self.model.parameter_shapes()
        return {name: np.frombuffer(view, np.float32).reshape(shapes[name]).copy()
                for name, view in self._c.param_views()}

    def load_state_dict(self, state):
        """Copies {name: array} (a state_dict of this model's names and shapes, from numpy or torch) into the
        weights; every name must be there."""
        shapes = self.model.parameter_shapes()
        missing = [n for n in shapes if n not in state]
        if missing:
            raise KeyError(f"the state_dict lacks {', '.join(missing[:4])}")
        for name, view in self._c.param_views():
            value = np.asarray(state[name].numpy() if hasattr(state[name], "numpy") else state[name], np.float32)
            if value.shape != tuple(shapes[name]):
                raise ValueError(f"{name}: shape {value.shape}, the model's is {tuple(shapes[name])}")
            np.frombuffer(view, np.float32)[:] = value.reshape(-1)

    def save(self, path):
        """Writes the weights to path as safetensors, as `snug train --save` does (atomic)."""
        self._c.save(str(path))

    def load(self, path):
        """Reads the weights from a safetensors file (a save, or a PyTorch state_dict saved with the same names)."""
        self._c.load(str(path))

    def save_state(self, dir, keep=2):
        """Writes the run's state into the folder dir now; returns the file."""
        return self._c.save_state(str(dir), int(keep), None)

    def memory(self):
        """{budget, total, peak}: the bytes the trainer holds."""
        return self._c.memory()

    @classmethod
    def resume(cls, state_dir, data=None, model=None):
        """The trainer of the newest valid state in state_dir (written by fit(state=...)), continued where it
        stopped: fit(data) then takes the remaining steps, to the same weights bit for bit as a run never
        stopped. data: the training data, when the plan counted it (plan(data=...)) and chose for a budget."""
        from .model import Model
        from .planning import plan
        info = _snug.state_info(str(state_dir))
        try:
            extra = json.loads(info["extra"])
        except ValueError:
            extra = {}
        if not isinstance(extra, dict) or _EXTRA_KEY not in extra:
            extra = {}
        model = model or Model(extra.get("model", info["model"]), extra.get("classes"))
        args = dict(extra.get("plan") or {})
        args.pop("batch", None)
        optimizer = optimizer_from_config(info["optim"])
        p = plan(model, batch=info["batch"], optimizer=optimizer, data=data, **args)
        t = cls(model, p, optimizer=optimizer, schedule=schedule_from_config(*info["schedule"]), clip=info["clip"],
                seed=info["seed"], shuffle=info["shuffle"], drop_last=info["drop_last"],
                max_nonfinite=info["max_nonfinite"])
        t._c.load_state(info["path"])
        if "epochs" in extra or "steps" in extra:
            t._fit_length = (extra.get("epochs"), extra.get("steps"))
        return t
