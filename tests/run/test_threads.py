"""Many threads at once: correct results with many distinct patterns and shapes,
and the plan caches stay within their bounds.

The caches are functools.lru_cache objects listed in ``rearr.run.cache.CACHES``.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch
from reference import assert_matches, reference

import rearr
import rearr.run.cache

N_THREADS = 16


def _cases(seed: int = 0, n: int = 240) -> list[tuple]:
    """(op, pattern, reduction, x, kwargs) over many patterns and shapes; tiny tensors."""
    rnd = random.Random(seed)
    nprng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        a, b, c = rnd.randint(1, 5), rnd.randint(1, 5), rnd.randint(1, 5)
        kind = k % 9
        if kind == 0:
            perm = rnd.sample("abc", 3)
            out.append(("rearrange", f"a b c -> {perm[0]} ({perm[1]} {perm[2]})", None,
                        nprng.standard_normal((a, b, c)), {}))
        elif kind == 1:
            out.append(("rearrange", "(a b) c -> b a c", None, nprng.standard_normal((a * b, c)), {"b": b}))
        elif kind == 2:
            out.append(("rearrange", "... c -> c (...)", None, nprng.standard_normal((a, b, c)[: rnd.randint(1, 3)]),
                        {}))
        elif kind == 3:
            red = rnd.choice(["sum", "max", "min", "prod", "mean"])
            pattern, shape = rnd.choice([("a b c -> c", (a, b, c)), ("a b c -> a 1 c", (a, b, c)),
                                         ("(a 2) b -> b a", (2 * a, b))])
            out.append(("reduce", pattern, red, nprng.standard_normal(shape), {}))
        elif kind == 4:
            out.append(("reduce", "a b c -> a", rnd.choice(["any", "all", "max", "sum"]),
                        nprng.integers(-2, 3, size=(a, b, c)), {}))
        elif kind == 5:
            out.append(("repeat", rnd.choice(["a b -> a r b", "a b -> (r a) b", "a b -> b a 2 r"]), None,
                        nprng.standard_normal((a, b)), {"r": c}))
        elif kind == 6:
            out.append(("rearrange", "b n[i] c -> b k c", None, nprng.standard_normal((a, b, c)),
                        {"i": nprng.integers(-b, b, size=(a, c + 1, c))}))
        elif kind == 7:
            out.append(("rearrange", "v[ids: p q] d -> p d q", None, nprng.standard_normal((a, b)),
                        {"ids": nprng.integers(-a, a, size=(c, 2))}))
        else:
            red = rnd.choice(["sum", "mean", "max", "min", "prod"])
            out.append(("scatter", rnd.choice(["b k -> b n[i]", "b k -> n[i] b"]), red,
                        nprng.standard_normal((a, b)), {"i": nprng.integers(-c, c, size=(a, b)), "n": c}))
    return out


def _call(op: str, pattern: str, reduction, x, kwargs: dict, backend: str):
    if backend == "torch":
        x = torch.from_numpy(x.copy())
        kwargs = {k: torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    if op == "reduce":
        return rearr.reduce(x, pattern, reduction, **kwargs)
    if op == "scatter":
        return rearr.scatter(x, pattern, reduction, **kwargs)
    return getattr(rearr, op)(x, pattern, **kwargs)


def _run_threads(work) -> list[str]:
    """Run work(thread_number) in N_THREADS threads started together; return the failures."""
    failures: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(N_THREADS)

    def target(t: int) -> None:
        try:
            barrier.wait(timeout=30)
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            with lock:
                failures.append(f"thread {t}: {type(e).__name__}: {e}"[:2000])

    threads = [threading.Thread(target=target, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "threads still running after 300 s"
    return failures


def _check_cache_bounds() -> None:
    caches = rearr.run.cache.CACHES
    assert caches, "rearr.run.cache.CACHES is empty"
    for f in caches:
        info = f.cache_info()
        assert info.maxsize is not None, f"{f.__name__}: unbounded cache"
        assert 0 <= info.currsize <= info.maxsize, (f.__name__, info)


def test_many_threads_many_patterns():
    cases = _cases()
    expected = [reference(op, x, p, red, **kw) for op, p, red, x, kw in cases]

    def work(t: int) -> None:
        order = list(range(len(cases)))
        random.Random(t).shuffle(order)
        for n, k in enumerate(order):
            op, p, red, x, kw = cases[k]
            backend = "torch" if (n + t) % 2 else "numpy"
            got = _call(op, p, red, x, kw, backend)
            assert_matches(got, expected[k], what=f"{backend} {op} {p!r} {x.shape} {red}")

    failures = _run_threads(work)
    assert not failures, "\n".join(failures[:5])
    _check_cache_bounds()


@pytest.mark.slow
def test_cache_eviction_under_threads():
    """More distinct (pattern, shape) keys than the caches hold, from all threads at once."""
    maxsize = max(f.cache_info().maxsize for f in rearr.run.cache.CACHES)
    side = int((maxsize * 1.5) ** 0.5) + 1
    shapes = [(i, j) for i in range(1, side + 1) for j in range(1, side + 1)]
    assert len(shapes) > maxsize

    def work(t: int) -> None:
        rnd = random.Random(100 + t)
        for i, j in rnd.sample(shapes, len(shapes) // 4):
            x = np.arange(i * j, dtype=np.float32).reshape(i, j)
            got = rearr.rearrange(x, "a b -> b a")
            np.testing.assert_array_equal(got, x.T)
            got = rearr.reduce(x, "a b -> b", "sum")
            np.testing.assert_allclose(got, x.sum(0), rtol=1e-5)
            if (i + j + t) % 4 == 0:
                idx = np.full((i, 1), j - 1)
                got = rearr.rearrange(x, "a n[k] -> a q", k=idx)
                np.testing.assert_array_equal(got, x[:, -1:])

    failures = _run_threads(work)
    assert not failures, "\n".join(failures[:5])
    _check_cache_bounds()


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_same_new_pattern_from_all_threads(backend):
    """A pattern no thread has seen yet, planned by all of them at the same moment."""
    x = np.arange(2 * 3 * 5 * 7, dtype=np.float64).reshape(2, 3 * 5, 7)
    pattern = f"a (b c) d -> d (c a) b  {'  ' * (backend == 'torch')}"  # distinct text per backend
    expected = x.reshape(2, 3, 5, 7).transpose(3, 2, 0, 1).reshape(7, 10, 3)

    def work(t: int) -> None:
        xx = x if backend == "numpy" else torch.from_numpy(x.copy())
        for _ in range(20):
            got = rearr.rearrange(xx, pattern, b=3)
            np.testing.assert_array_equal(np.asarray(got), expected)

    failures = _run_threads(work)
    assert not failures, "\n".join(failures[:5])
    _check_cache_bounds()
