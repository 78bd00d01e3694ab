"""Optimizers and learning-rate schedules: the settings of snug_optim_config and snug_schedule_config."""

from dataclasses import dataclass, asdict


@dataclass(frozen=True)
class SGD:
    """SGD with momentum (0: none, and no optimizer state), Nesterov's variant, L2 weight decay."""
    lr: float = 0.05
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 0.0

    def config(self):
        return dict(kind="sgd", **asdict(self))


@dataclass(frozen=True)
class AdamW:
    """AdamW (decoupled weight decay: lr * weight_decay * p); its state is twice the parameters."""
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def config(self):
        return dict(kind="adamw", lr=self.lr, beta1=self.betas[0], beta2=self.betas[1], eps=self.eps,
                    weight_decay=self.weight_decay)


@dataclass(frozen=True)
class Cosine:
    """Linear warmup from 0 over `warmup` optimizer steps, then cosine decay to lr * min_ratio at the last."""
    warmup: int = 0
    min_ratio: float = 0.0

    def config(self):
        return ("cosine", int(self.warmup), float(self.min_ratio))


@dataclass(frozen=True)
class Constant:
    """The learning rate unchanged."""

    def config(self):
        return ("constant", 0, 0.0)


def optimizer_from_config(c):
    """The optimizer of a state's stored configuration."""
    if c["kind"] == "adamw":
        return AdamW(lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"], weight_decay=c["weight_decay"])
    return SGD(lr=c["lr"], momentum=c["momentum"], nesterov=c["nesterov"], weight_decay=c["weight_decay"])


def schedule_from_config(kind, warmup, min_ratio):
    return Cosine(warmup=warmup, min_ratio=min_ratio) if kind == "cosine" else Constant()
