"""Hypothesis strategies: random *valid* rearr patterns with matching inputs.

Every strategy draws a `Case`: the operation, the pattern text, the input
array, the reduction, and the keywords (lengths and index arrays).  The
patterns cover groups, '...' (alone, and inside an output group), unit axes
('1' and '()'), anonymous axes in reduce and repeat, repeated and reduced axes,
gather and scatter brackets with default and declared axes, both at once;
lengths are sometimes given although inferable, and left out where they can
be inferred.  Index arrays hold negative values and duplicates, and now and
then one value out of range (the reference then expects a RearrError).

Sizes stay tiny: axis lengths 1..4, at most 5 axes a side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

POOL = ("a", "b", "c", "d", "e", "f", "g", "h", "k", "p", "q", "t", "w", "x", "y", "z")
INDEX_POOL = ("idx", "jdx", "ids", "pos", "src", "dst", "ix", "iy")
REDUCE_REDUCTIONS = ("min", "max", "sum", "mean", "prod", "any", "all")
SCATTER_REDUCTIONS = ("sum", "mean", "max", "min", "prod", "set")
DTYPES = ("float64", "float32", "int64", "int32", "bool")
PATTERN_ALPHABET = "abchkn_xyz0123456789 ()[]:,->.…*\t\n_"  # what patterns are made of, for random strings


@dataclass
class Case:
    op: str
    pattern: str
    x: np.ndarray
    reduction: str | None = None
    kwargs: dict[str, object] = field(default_factory=dict)  # lengths (int) and indices (np.ndarray)
    fill: object = None
    into: np.ndarray | None = None  # scatter into an existing tensor
    as_list: bool = False  # pass x as a list of its sub-arrays along the first axis
    einops_ok: bool = False  # einops accepts this pattern (no brackets, no '…')

    def ref_kwargs(self) -> dict[str, object]:
        kw = dict(self.kwargs)
        if self.fill is not None:
            kw["fill"] = self.fill
        if self.into is not None:
            kw["into"] = self.into
        return kw

    def inputs(self, backend: str) -> tuple[object, dict[str, object]]:
        """Fresh copies of x and the keywords, as numpy arrays or torch tensors."""
        conv = _to_backend(backend)
        if self.as_list:
            x = [conv(t) for t in self.x]
        else:
            x = conv(self.x)
        kw = {k: conv(v) if isinstance(v, np.ndarray) else v for k, v in self.ref_kwargs().items()}
        return x, kw

    def describe(self) -> str:
        shapes = {k: (v.shape, str(v.dtype)) if isinstance(v, np.ndarray) else v for k, v in self.kwargs.items()}
        into = "" if self.into is None else f", into{list(self.into.shape)}"
        return (f"{self.op}(x{list(self.x.shape)}:{self.x.dtype}{' as list' if self.as_list else ''}, "
                f"{self.pattern!r}, {self.reduction!r}, fill={self.fill!r}{into}, {shapes})")


def _to_backend(backend: str):
    if backend == "numpy":
        return lambda a: np.array(a, copy=True)
    import torch

    return lambda a: torch.from_numpy(np.array(a, copy=True))


# --- drawing sides ---------------------------------------------------------------------
# A token: ("name", name, bracket_text_or_None) | ("anon", value) | ("ell",) | ("one",) | ("unit",)
# "one" is the literal 1 (may sit in a group), "unit" is "()" (stands alone).


def _groupable(tok: tuple, side: str) -> bool:
    if tok[0] == "name":
        return tok[2] is None
    if tok[0] == "ell":
        return side == "output"
    return tok[0] in ("anon", "one")


def _render_token(tok: tuple, draw, unicode_ok: bool) -> str:
    kind = tok[0]
    if kind == "name":
        if tok[2] is None:
            return tok[1]
        space = draw(st.sampled_from(["", "", " "]))
        return f"{tok[1]}{space}{tok[2]}"
    if kind == "anon":
        return str(tok[1])
    if kind == "ell":
        return "…" if unicode_ok and _chance(draw, 10) else "..."
    if kind == "one":
        return "1"
    return "()"


def _layout(draw, tokens: list[tuple], side: str) -> list[list[tuple]]:
    """Split the tokens (already in order) into dimensions: singles and groups."""
    dims: list[list[tuple]] = []
    for tok in tokens:
        if dims and _groupable(tok, side) and all(_groupable(t, side) for t in dims[-1]) and draw(st.booleans()):
            if not isinstance(dims[-1], _Group):
                dims[-1] = _Group(dims[-1])
            dims[-1].append(tok)
        else:
            dims.append([tok])
            if _groupable(tok, side) and _chance(draw, 6):
                dims[-1] = _Group(dims[-1])  # a one-axis group, '(a)'
    return dims


class _Group(list):
    """A dimension written in parentheses."""


def _render(draw, dims: list[list[tuple]], unicode_ok: bool) -> str:
    parts = []
    for d in dims:
        inner = " ".join(_render_token(t, draw, unicode_ok) for t in d)
        parts.append(f"({inner})" if isinstance(d, _Group) else inner)
    sep = draw(st.sampled_from([" ", " ", "  "]))
    return sep.join(parts)


def _insert_units(draw, tokens: list[tuple], max_units: int = 2) -> list[tuple]:
    tokens = list(tokens)
    for _ in range(draw(st.integers(0, max_units))):
        pos = draw(st.integers(0, len(tokens)))
        tokens.insert(pos, draw(st.sampled_from([("one",), ("unit",)])))
    return tokens


def _input_shape(dims: list[list[tuple]], lengths: dict[str, int], ell: list[int]) -> tuple[int, ...]:
    shape: list[int] = []
    for d in dims:
        if len(d) == 1 and d[0][0] == "ell" and not isinstance(d, _Group):
            shape.extend(ell)
            continue
        n = 1
        for t in d:
            if t[0] == "name":
                n *= lengths[t[1]]
            elif t[0] == "anon":
                n *= t[1]
            elif t[0] == "ell":
                n *= math.prod(ell)
        shape.append(n)
    return tuple(shape)


def _length_keywords(draw, in_dims: list[list[tuple]], lengths: dict[str, int], must: set[str],
                     optional: set[str]) -> dict[str, int]:
    """Keywords: every group on the input side leaves at most one name unknown;
    names in ``must`` are always given, those in ``optional`` sometimes."""
    kw: dict[str, int] = {}
    for d in in_dims:
        names = [t[1] for t in d if t[0] == "name" and t[2] is None]
        if len(d) == 1 and not isinstance(d, _Group):
            continue
        if not names:
            continue
        unknown = draw(st.sampled_from([*names, None]))
        for nm in names:
            if nm != unknown:
                kw[nm] = lengths[nm]
    for nm in must:
        kw[nm] = lengths[nm]
    for nm in sorted(optional):
        if _chance(draw, 5):
            kw[nm] = lengths[nm]
    return kw


def _values(draw, shape: tuple[int, ...], dtype: str, reduction: str | None) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        lo, hi = (-1, 2) if reduction == "prod" else (-3, 4)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    vals = rng.standard_normal(shape)
    if reduction == "prod":
        vals = np.sign(vals) * (0.5 + np.abs(vals) % 1.0)  # |v| in [0.5, 1.5): no under/overflow
    return vals.astype(dtype)


def _pick(draw, pool: tuple[str, ...], n: int) -> list[str]:
    """n distinct names from the pool, in a random order."""
    return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n, unique=True))


def _chance(draw, k: int) -> bool:
    """True about once in k draws (and False for the shrunk, minimal example)."""
    return draw(st.integers(1, k)) == 2


def _maybe_list(draw, x: np.ndarray) -> bool:
    return x.ndim >= 1 and x.shape[0] >= 1 and _chance(draw, 10)


# --- rearrange / reduce / repeat, no brackets ------------------------------------------


@st.composite
def transform_cases(draw, ops: tuple[str, ...] = ("rearrange", "reduce", "repeat"),
                    dtypes: tuple[str, ...] = DTYPES) -> Case:
    op = draw(st.sampled_from(ops))
    n = draw(st.integers(0, 4))
    names = _pick(draw, POOL, n)
    lengths = {nm: draw(st.integers(1, 4)) for nm in names}
    use_ell = draw(st.booleans())
    ell = draw(st.lists(st.integers(1, 3), max_size=max(0, min(2, 5 - n)))) if use_ell else []
    unicode_ok = _chance(draw, 5)
    anon_in: list[tuple] = []
    anon_out: list[tuple] = []
    keep_ell = use_ell
    if op == "rearrange":
        in_names, out_names = names, names
    elif op == "reduce":
        in_names = names
        out_names = [nm for nm in names if draw(st.booleans())]
        if n < 5 and _chance(draw, 4):
            anon_in = [("anon", draw(st.integers(2, 3)))]
        keep_ell = use_ell and draw(st.booleans())
    else:
        out_names = names
        in_names = [nm for nm in names if draw(st.booleans())]
        if _chance(draw, 4):
            anon_out = [("anon", draw(st.integers(2, 3)))]
    in_tokens = [("name", nm, None) for nm in in_names] + anon_in + ([("ell",)] if use_ell else [])
    out_tokens = [("name", nm, None) for nm in out_names] + anon_out + ([("ell",)] if keep_ell else [])
    in_tokens = _insert_units(draw, list(draw(st.permutations(in_tokens))))
    out_tokens = _insert_units(draw, list(draw(st.permutations(out_tokens))))
    in_dims = _layout(draw, in_tokens, "input")
    out_dims = _layout(draw, out_tokens, "output")
    left, right = _render(draw, in_dims, unicode_ok), _render(draw, out_dims, unicode_ok)
    pattern = f"{left} -> {right}" if draw(st.integers(0, 5)) else f"{left}->{right}"
    new = set(out_names) - set(in_names)
    kw = _length_keywords(draw, in_dims, lengths, must=new, optional=set(in_names))
    shape = _input_shape(in_dims, lengths, ell)
    reduction = draw(st.sampled_from(REDUCE_REDUCTIONS)) if op == "reduce" else None
    dtype = draw(st.sampled_from(dtypes))
    x = _values(draw, shape, dtype, reduction)
    return Case(op, pattern, x, reduction, kw, as_list=_maybe_list(draw, x), einops_ok="…" not in pattern)


# --- gather (rearrange with brackets on the input side) --------------------------------


def _index_values(draw, shape: tuple[int, ...], n: int, dtype: str, bad: bool) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if n == 0:
        vals = np.zeros(shape, dtype=np.int64)
    else:
        vals = rng.integers(0 if _chance(draw, 3) else -n, n, size=shape)  # sometimes no negative value
    if bad and vals.size:
        flat = vals.reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from([n, n + 1, -n - 1, -n - 5]))
    return vals.astype(dtype)


def _bracket(draw, name: str, axes: list[str] | None) -> str:
    if axes is None:
        return f"[{name}]"
    sep = draw(st.sampled_from([": ", ":", " : "]))
    return f"[{name}{sep}{' '.join(axes)}]" if axes else f"[{name}:]"


def _elementary(dims: list[list[tuple]], ell: list[int]) -> list[str]:
    """The side's elementary axis names in order, '...' expanded as '…0', '…1', ..."""
    out: list[str] = []
    for d in dims:
        for t in d:
            if t[0] == "name":
                out.append(t[1])
            elif t[0] == "ell":
                out.extend(f"…{i}" for i in range(len(ell)))
    return out


@st.composite
def gather_cases(draw, dtypes: tuple[str, ...] = DTYPES) -> Case:
    n_b, n_g, n_k = draw(st.integers(0, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 2))
    names = _pick(draw, POOL, n_b + n_g + n_k)
    b_names, g_names, k_names = names[:n_b], names[n_b:n_b + n_g], names[n_b + n_g:n_b + n_g + n_k]
    lengths = {nm: draw(st.integers(1, 4)) for nm in b_names + g_names}
    lengths.update({nm: draw(st.integers(1, 3)) for nm in k_names})
    ell = draw(st.lists(st.integers(1, 2), max_size=2)) if _chance(draw, 4) else None
    idx_names = _pick(draw, INDEX_POOL, n_g)
    declared: list[list[str] | None] = []
    for _ in g_names:
        if draw(st.integers(0, 2)):
            axes = [a for a in b_names + k_names if draw(st.booleans())]
            declared.append(list(draw(st.permutations(axes))))
        else:
            declared.append(None)
    covered = {a for d in declared if d is not None for a in d}
    if any(d is None for d in declared):
        covered |= set(k_names)
    for k in k_names:
        if k not in covered:
            d = declared[draw(st.integers(0, n_g - 1))]
            if d is None:
                continue
            d.insert(draw(st.integers(0, len(d))), k)
    in_tokens = [("name", nm, None) for nm in b_names]
    in_tokens += [("name", g, _bracket(draw, i, d)) for g, i, d in zip(g_names, idx_names, declared, strict=True)]
    out_tokens = [("name", nm, None) for nm in b_names + k_names]
    if ell is not None:
        in_tokens.append(("ell",))
        out_tokens.append(("ell",))
    in_tokens = _insert_units(draw, list(draw(st.permutations(in_tokens))), 1)
    out_tokens = _insert_units(draw, list(draw(st.permutations(out_tokens))), 1)
    in_dims = _layout(draw, in_tokens, "input")
    out_dims = _layout(draw, out_tokens, "output")
    pattern = f"{_render(draw, in_dims, False)} -> {_render(draw, out_dims, False)}"
    ell_l = ell or []
    all_len = dict(lengths) | {f"…{i}": n for i, n in enumerate(ell_l)}
    out_el = _elementary(out_dims, ell_l)
    kw: dict[str, object] = _length_keywords(draw, in_dims, lengths, must=set(), optional=set(b_names + k_names))
    bad = _chance(draw, 20)
    idx_dtype = draw(st.sampled_from(["int64", "int32"]))
    for g, i, d in zip(g_names, idx_names, declared, strict=True):
        axes = out_el if d is None else d
        shape = tuple(all_len[a] for a in axes)
        kw[i] = _index_values(draw, shape, lengths[g], idx_dtype, bad)
        bad = False
    shape = _input_shape(in_dims, lengths, ell_l)
    dtype = draw(st.sampled_from(dtypes))
    x = _values(draw, shape, dtype, None)
    return Case("rearrange", pattern, x, None, kw, as_list=_maybe_list(draw, x))


# --- scatter (brackets on the output side, sometimes on both) --------------------------


@st.composite
def scatter_cases(draw, dtypes: tuple[str, ...] = ("float64", "float32", "int64", "int32"),
                  reductions: tuple[str, ...] = SCATTER_REDUCTIONS) -> Case:
    names = _pick(draw, POOL, 8)
    n_m = draw(st.integers(1, 3))
    m_names = names[:n_m]
    rest = names[n_m:]
    lengths = {nm: draw(st.integers(1, 4)) for nm in m_names}
    ell = draw(st.lists(st.integers(1, 2), max_size=2)) if _chance(draw, 5) else None
    ell_l = ell or []
    both = _chance(draw, 4)  # a gather on the input side too
    reduction = draw(st.sampled_from(reductions))
    idx_pool = _pick(draw, INDEX_POOL, 4)
    in_tokens: list[tuple] = [("name", nm, None) for nm in m_names]
    kw: dict[str, object] = {}
    idx_dtype = draw(st.sampled_from(["int64", "int32"]))
    bad = _chance(draw, 20)
    middle = list(m_names)
    gather_axis = None
    gather_spec = None
    if both:
        gather_axis, e = rest[0], rest[1]
        rest = rest[2:]
        lengths[gather_axis] = draw(st.integers(1, 4))
        lengths[e] = draw(st.integers(1, 3))
        g_axes = [a for a in m_names if draw(st.booleans())] + [e]
        g_axes = list(draw(st.permutations(g_axes)))
        gather_spec = (idx_pool.pop(), g_axes)
        in_tokens.append(("name", gather_axis, _bracket(draw, gather_spec[0], g_axes)))
        middle.append(e)
    if ell is not None:
        in_tokens.append(("ell",))
    in_tokens = _insert_units(draw, list(draw(st.permutations(in_tokens))), 1)
    in_dims = _layout(draw, in_tokens, "input")
    # The middle tensor's axes in order (the default axes of a scatter index).
    mid_el = [a for a in _elementary(in_dims, ell_l) if a != gather_axis] + ([middle[-1]] if both else [])
    kept = [a for a in middle if draw(st.booleans())]
    lost = [a for a in middle if a not in kept]
    n_s = draw(st.integers(1, 2))
    s_names = []
    for k in range(n_s):
        if both and k == 0 and draw(st.booleans()):
            s_names.append(gather_axis)  # 'v[src: e] c -> v[dst: e] c': the same axis, written
        else:
            s_names.append(rest.pop())
            lengths[s_names[-1]] = draw(st.integers(1, 4))
    injective = reduction == "set" and not _chance(draw, 4)
    if injective and lost:
        need = math.prod(lengths[a] for a in lost)
        if need > 4 or s_names[0] == gather_axis:
            injective = False
        else:
            lengths[s_names[0]] = max(lengths[s_names[0]], need)
    declared: list[list[str] | None] = []
    for k in range(n_s):
        if not both and _chance(draw, 3):
            declared.append(None)
        else:
            axes = [a for a in middle if draw(st.booleans())]
            if k == 0 and injective:
                axes = list(dict.fromkeys(axes + lost))
            declared.append(list(draw(st.permutations(axes))))
    covered = {a for d in declared for a in (mid_el if d is None else d)}
    for a in lost:
        if a not in covered:
            d = declared[draw(st.integers(0, n_s - 1))]
            assert d is not None
            d.insert(draw(st.integers(0, len(d))), a)
    s_idx = [idx_pool.pop() for _ in s_names]
    out_tokens = [("name", nm, None) for nm in kept]
    out_tokens += [("name", s, _bracket(draw, i, d)) for s, i, d in zip(s_names, s_idx, declared, strict=True)]
    if ell is not None:
        out_tokens.append(("ell",))
    out_tokens = _insert_units(draw, list(draw(st.permutations(out_tokens))), 1)
    out_dims = _layout(draw, out_tokens, "output")
    pattern = f"{_render(draw, in_dims, False)} -> {_render(draw, out_dims, False)}"
    all_len = dict(lengths) | {f"…{i}": n for i, n in enumerate(ell_l)}
    kw.update(_length_keywords(draw, in_dims, lengths, must={s for s in s_names if s != gather_axis},
                               optional=set(m_names)))
    if gather_spec is not None:
        name, axes = gather_spec
        kw[name] = _index_values(draw, tuple(all_len[a] for a in axes), lengths[gather_axis], idx_dtype, bad)
        bad = False
    for k, (s, i, d) in enumerate(zip(s_names, s_idx, declared, strict=True)):
        axes = mid_el if d is None else d
        shape = tuple(all_len[a] for a in axes)
        if k == 0 and injective and lost:
            kw[i] = _injective_index(draw, axes, lost, all_len, lengths[s], idx_dtype)
        else:
            kw[i] = _index_values(draw, shape, lengths[s], idx_dtype, bad)
            bad = False
    shape = _input_shape(in_dims, lengths, ell_l)
    dtype = draw(st.sampled_from(dtypes))
    x = _values(draw, shape, dtype, reduction)
    fill = draw(st.sampled_from([None, None, -1, 7] + ([2.5] if dtype.startswith("float") else [])))
    into = None
    if _chance(draw, 5):  # scatter into an existing tensor; its shape gives the written lengths
        fill = None
        into = _values(draw, _input_shape(out_dims, lengths, ell_l), dtype, reduction)
        for s in s_names:
            if s in kw and draw(st.booleans()):
                del kw[s]
    return Case("scatter", pattern, x, reduction, kw, fill=fill, into=into, as_list=_maybe_list(draw, x))


def _injective_index(draw, axes: list[str], lost: list[str], all_len: dict[str, int], n: int,
                     dtype: str) -> np.ndarray:
    """An index whose value depends only on the lost axes, one distinct position each
    (a random one of the two spellings, i and i - n)."""
    lost_shape = tuple(all_len[a] for a in lost)
    perm = list(draw(st.permutations(range(n))))[: math.prod(lost_shape)]
    out = np.empty(tuple(all_len[a] for a in axes), dtype=np.int64)
    for pos in np.ndindex(*out.shape):
        env = dict(zip(axes, pos, strict=True))
        rank = int(np.ravel_multi_index(tuple(env[a] for a in lost), lost_shape)) if lost_shape else 0
        v = perm[rank]
        out[pos] = v - n if (v + sum(pos)) % 2 else v
    return out.astype(dtype)


def any_case() -> st.SearchStrategy[Case]:
    return st.one_of(transform_cases(), gather_cases(), scatter_cases())


# --- mutations (the parser fuzzing of techniques/test_fuzz.py and syntax/test_driver.py) --------


@st.composite
def mutated(draw, base: st.SearchStrategy[str]) -> str:
    """A string of ``base`` after one to three random edits: mostly an invalid pattern, now and then a valid one."""
    text = draw(base)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "swap", "duplicate"]))
        if not text:
            kind = "insert"
        i = draw(st.integers(0, max(0, len(text) - 1)))
        if kind == "delete":
            j = draw(st.integers(i, min(len(text), i + 3)))
            text = text[:i] + text[j:]
        elif kind == "insert":
            piece = draw(st.sampled_from(list(PATTERN_ALPHABET) + ["->", "...", "[i]", "[i: a]", "(", ")"]))
            text = text[:i] + piece + text[i:]
        elif kind == "replace":
            text = text[:i] + draw(st.sampled_from(PATTERN_ALPHABET)) + text[i + 1:]
        elif kind == "swap":
            j = draw(st.integers(0, len(text) - 1))
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
        else:
            j = draw(st.integers(i, min(len(text), i + 6)))
            text = text[:j] + text[i:j] + text[j:]
    return text
