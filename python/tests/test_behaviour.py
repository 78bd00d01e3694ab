"""What a Python user relies on: the steps run with the GIL released, numpy arrays are read where they are (no
copy), Ctrl-C leaves a state that resumes to the same bits, data through __getitem__, predict, and no leak."""

import gc
import os
import signal
import threading
import tracemalloc

import numpy as np
import pytest

import snug
from conftest import resident_bytes

TINY = """[model]
input = image 1 28 28
[flat]
type = flatten
[fc1]
type = linear
out = 32
[relu1]
type = relu
[fc2]
type = linear
out = 10
[loss]
type = softmax_cross_entropy
"""


@pytest.fixture
def tiny(tmp_path):
    f = tmp_path / "tiny.ini"
    f.write_text(TINY)
    return str(f)


def pattern(n, seed=0):
    """n images (1, 28, 28) in [-1, 1] and labels, made without holding a second copy."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 1, 28, 28)).astype(np.float32)
    y = (np.arange(n) % 10).astype(np.int32)
    return x, y


def trainer_for(model_path, batch=32, seed=1, **plan_args):
    m = snug.Model(model_path)
    sgd = snug.SGD(lr=0.05, momentum=0.9)
    return snug.Trainer(m, snug.plan(m, batch=batch, optimizer=sgd, **plan_args), optimizer=sgd,
                        schedule=snug.Cosine(warmup=3), seed=seed)


def test_gil_is_released_during_every_step(mnist_dir):
    """A Python thread counts while fit runs; the callback after each step (which takes the GIL) sees the count
    grow between every two steps, so no step held the GIL throughout."""
    count, done = [0], threading.Event()

    def counter():
        while not done.is_set():
            count[0] += 1

    seen = []
    t = trainer_for("cnn", batch=64)
    thread = threading.Thread(target=counter)
    thread.start()
    try:
        t.fit(snug.data.mnist(str(mnist_dir)), steps=8, progress=lambda st: seen.append(count[0]))
    finally:
        done.set()
        thread.join()
    assert len(seen) == 8
    assert all(b > a for a, b in zip(seen, seen[1:])), seen


def test_arrays_are_borrowed_not_copied():
    """Fitting from 1 GiB of arrays raises resident memory by no more than the plan's bytes + 8 MiB (a copy would
    add the whole GiB). Scaled down where the machine has less than 4 GiB available."""
    avail = int(open("/proc/meminfo").read().split("MemAvailable:")[1].split()[0]) * 1024
    size = (1 << 30) if avail > (4 << 30) else (128 << 20)
    n = size // (28 * 28 * 4)
    x = np.empty((n, 1, 28, 28), np.float32)
    x[...] = np.linspace(-1, 1, 28 * 28, dtype=np.float32).reshape(1, 1, 28, 28)  # every page touched
    y = (np.arange(n) % 10).astype(np.int32)
    warm = trainer_for("cnn", batch=64)  # the engine's threads and the BLAS started before measuring
    warm.fit(snug.data.arrays(x[:256], y[:256]), steps=2, progress=False)
    del warm
    gc.collect()
    data = snug.data.arrays(x, y)
    m = snug.Model("cnn")
    p = snug.plan(m, batch=64, mem="64MiB", data=data)
    before = resident_bytes()
    t = snug.Trainer(m, p)
    peak = [resident_bytes()]
    t.fit(data, steps=10, progress=lambda st: peak.append(resident_bytes()))
    grew = max(peak) - before
    assert grew <= p.peak + (8 << 20), (grew, p.peak)


def test_sigint_leaves_a_state_that_resumes_to_the_same_bits(tiny, tmp_path):
    x, y = pattern(600)
    steps = 12
    straight = trainer_for(tiny)
    straight.fit(snug.data.arrays(x, y), steps=steps, progress=False)

    def interrupt_at_5(st):
        if st["step"] == 5:
            os.kill(os.getpid(), signal.SIGINT)

    state = tmp_path / "state"
    stopped = trainer_for(tiny)
    with pytest.raises(KeyboardInterrupt):
        stopped.fit(snug.data.arrays(x, y), steps=steps, state=str(state), progress=interrupt_at_5)
    assert stopped.history.steps[-1]["step"] == 5  # the step in progress finished, no more
    resumed = snug.Trainer.resume(str(state))
    history = resumed.fit(snug.data.arrays(x, y), progress=False)  # to the interrupted run's length
    assert [s["step"] for s in history.steps] == list(range(6, steps + 1))
    a, b = straight.state_dict(), resumed.state_dict()
    assert list(a) == list(b)
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_other_dtypes_are_refused_with_the_conversion():
    x, y = pattern(8)
    with pytest.raises(TypeError, match=r"ascontiguousarray\(x, dtype=numpy.float32\)"):
        snug.data.arrays(x.astype(np.float64), y)
    with pytest.raises(TypeError, match="not C-contiguous"):
        snug.data.arrays(np.asfortranarray(x.reshape(8, 784)), y)
    with pytest.raises(TypeError, match="int32"):
        snug.data.arrays(x, y.astype(np.int64))


def test_getitem_data_set_trains_as_the_arrays_do(tiny):
    """Any object with __len__/__getitem__, read by the library's read-ahead thread through the callback data
    set, gives the same weights as the same samples borrowed as arrays."""
    x, y = pattern(200)

    class Samples:
        def __len__(self):
            return len(y)

        def __getitem__(self, i):
            return x[i].tolist(), int(y[i])

    a, b = trainer_for(tiny), trainer_for(tiny)
    a.fit(snug.data.arrays(x, y), steps=6, progress=False)
    b.fit(Samples(), steps=6, progress=False)
    for name, value in a.state_dict().items():
        assert value.tobytes() == b.state_dict()[name].tobytes(), name

    class Broken(Samples):
        def __getitem__(self, i):
            if i > 0:  # the first sample serves to learn the shape
                raise RuntimeError("disk on fire")
            return super().__getitem__(i)

    with pytest.raises(snug.Error, match="disk on fire"):
        trainer_for(tiny).fit(snug.data.sequence(Broken(), classes=10), steps=2, progress=False)


def test_predict_and_evaluate_agree(tiny):
    x, y = pattern(100)
    t = trainer_for(tiny, batch=16)
    t.fit(snug.data.arrays(x, y), steps=5, progress=False)
    logits = t.predict(x)
    assert logits.shape == (100, 10)
    scores = t.evaluate(snug.data.arrays(x, y))
    assert scores["accuracy"] == pytest.approx(float(np.mean(logits.argmax(1) == y)))
    sd = t.state_dict()
    h = np.maximum(x.reshape(100, -1).astype(np.float64) @ sd["fc1.weight"].T + sd["fc1.bias"], 0)
    want = h @ sd["fc2.weight"].T + sd["fc2.bias"]
    assert np.max(np.abs(logits - want)) <= 1e-4 * (1 + np.max(np.abs(want)))


def test_no_leak_over_1000_cycles(tiny):
    """Model, plan, data set, trainer and a step, made and dropped 1,000 times: neither Python's allocations
    (tracemalloc) nor the process's resident memory grow by what one cycle holds (its plan)."""
    x, y = pattern(64)

    def cycle():
        t = trainer_for(tiny, batch=16)
        t.fit(snug.data.arrays(x, y), steps=1, progress=False)
        return t.plan.peak

    for _ in range(100):
        one = cycle()
    gc.collect()
    tracemalloc.start()
    py_before, rss_before = tracemalloc.get_traced_memory()[0], resident_bytes()
    for _ in range(900):
        cycle()
    gc.collect()
    py_after, rss_after = tracemalloc.get_traced_memory()[0], resident_bytes()
    tracemalloc.stop()
    assert py_after - py_before < 64 << 10
    assert rss_after - rss_before < one, (rss_after - rss_before, one)


def test_state_dict_loads_into_torch(tiny):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed (scripts/install-deps.sh --bench)")
    x, y = pattern(32)
    t = trainer_for(tiny, batch=16)
    t.fit(snug.data.arrays(x, y), steps=3, progress=False)
    net = torch.nn.Sequential()
    net.add_module("flat", torch.nn.Flatten())
    net.add_module("fc1", torch.nn.Linear(784, 32))
    net.add_module("relu1", torch.nn.ReLU())
    net.add_module("fc2", torch.nn.Linear(32, 10))
    net.load_state_dict({k: torch.from_numpy(v) for k, v in t.state_dict().items()})
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    assert np.max(np.abs(t.predict(x) - want)) <= 1e-4 * (1 + np.max(np.abs(want)))
