"""The jax backend's own derivative rules: a product scatter's, and a max / min scatter's, which are torch's
(imported when the backend is made, once jax is)."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax


@jax.custom_jvp
def product_at(start: Any, at: tuple, values: Any) -> Any:
    """``start.at[at].multiply(values, mode="drop")``, with a derivative. jax's scatter_mul has one only
    under ``unique_indices=True``, which a scatter with duplicates cannot promise."""
    return start.at[at].multiply(values, mode="drop")


@product_at.defjvp
def _product_at_jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """d out[p] = d start[p] * P[p] + sum over the values v_i at p of dv_i * start[p] * O_i, where P[p]
    is the product of the values at p and O_i the product of the others there. Linear in the tangents,
    so jax transposes it for reverse mode. O_i is made of products only (no division, which a zero
    breaks), and P is a product_at: the rule differentiates again, exactly, zeros included."""
    start, at, values = primals
    d_start, _, d_values = tangents
    every = product_at(jnp.ones(start.shape, values.dtype), at, values)
    d_sources = d_values * start.at[at].get(mode="fill", fill_value=0) * _others(start.shape, at, values)
    d_out = d_start * every + jnp.zeros(start.shape, start.dtype).at[at].add(d_sources, mode="drop")
    return product_at(start, at, values), d_out


def _others(shape: tuple, at: tuple, values: Any) -> Any:
    """For each value, the product of the other values that land on its place: the values sorted by
    place, a product of those before it and one of those after it in its place's run."""
    if values.size == 0:  # no run to begin or end (shapes are static, under jit too)
        return jnp.ones(values.shape, values.dtype)
    size = math.prod(shape)
    places = jnp.arange(size).reshape(shape).at[at].get(mode="fill", fill_value=size)  # a dropped one: past the end
    places = jnp.broadcast_to(places, values.shape).reshape(-1)
    order = jnp.argsort(places, stable=True)
    sorted_places, v = places[order], values.reshape(-1)[order]
    new = sorted_places[1:] != sorted_places[:-1]
    first = jnp.concatenate([jnp.ones((1,), bool), new])  # each value that begins a place's run
    last = jnp.concatenate([new, jnp.ones((1,), bool)])
    one = jnp.ones((1,), v.dtype)
    before = jnp.where(first, 1, jnp.concatenate([one, _run_products(v, first)[:-1]]))
    after = jnp.where(last, 1, jnp.concatenate([_run_products(v[::-1], last[::-1])[::-1][1:], one]))
    return (before * after)[jnp.argsort(order)].reshape(values.shape)


def _run_products(v: Any, first: Any) -> Any:
    """The running product of v, started again at each position where ``first`` holds."""
    def combine(a: tuple, b: tuple) -> tuple:
        return jnp.where(b[1], b[0], a[0] * b[0]), a[1] | b[1]

    return lax.associative_scan(combine, (v, first))[0]


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def extremum_at(start: Any, at: tuple, values: Any, reduction: str, start_ties: bool) -> Any:
    """``start.at[at].max(values, mode="drop")`` (or min), with torch's derivative: the k sources equal to
    a place's result share its derivative, 1/k each, and a place whose result is NaN (no source equals
    it) has a NaN derivative. ``start_ties``: start is into=, which counts as one more source where it
    ties (torch's include_self=True); else start is the identity (-inf for max), which takes no part,
    and a place that nothing reaches counts 1. jax's own rule gives 0 through a NaN and counts the
    identity as a tie where every source is that infinity."""
    return getattr(start.at[at], reduction)(values, mode="drop")


@extremum_at.defjvp
def _extremum_at_jvp(reduction: str, start_ties: bool, primals: tuple, tangents: tuple) -> tuple[Any, Any]:
    """d out[p] = (sum of the tied tangents at p) / (their count): linear in the tangents, so jax
    transposes it for reverse mode, where a source that ties gets its place's cotangent / k."""
    start, at, values = primals
    d_start, _, d_values = tangents
    out = extremum_at(start, at, values, reduction, start_ties)
    tie = values == out.at[at].get(mode="fill", fill_value=jnp.nan)  # a dropped value ties nothing
    zeros = jnp.zeros(out.shape, out.dtype)
    count = zeros.at[at].add(jnp.broadcast_to(tie, values.shape).astype(out.dtype), mode="drop")
    # products, not selections, as torch's backward and jnp.max's rule: a cotangent of 0 at a NaN place
    # still gives its sources NaN (0 / 0), so a NaN source shows in every derivative, on both backends
    tied = zeros.at[at].add(tie * d_values, mode="drop")
    if start_ties:
        start_tie = start == out
        count, tied = count + start_tie, tied + start_tie * d_start
    else:
        reached = zeros.at[at].add(jnp.ones(values.shape, out.dtype), mode="drop")
        count = jnp.where(reached == 0, 1, count)
    return out, tied / count
