"""The hint tables that tests apply literally (tests/test_did_you_mean.py, tests/tools/test_check_hints.py and
tests/tools/test_check_fix.py), and how a hint is applied: the fixed pattern it quotes, the keyword it
renames, the reduction it names, the length it says to pass."""

from __future__ import annotations

import re

import numpy as np

INDEX = np.array([0, 1, 0])


def apply(hint: str, pattern: str, reduction: str | None, lengths: dict) -> tuple[str, str | None, dict]:
    """The hint's fix, taken literally: a quoted pattern, a keyword renamed, a reduction named."""
    applied = False
    if quoted := re.findall(r"'([^']*->[^']*)'", hint):
        pattern, applied = quoted[-1], True
    if m := re.search(r"rename (\w+)= to (\w+)=", hint):
        lengths = {m[2] if k == m[1] else k: v for k, v in lengths.items()}
        applied = True
    elif m := re.search(r"rename it to (\w+)=$", hint):
        (wrong,) = [k for k, v in lengths.items() if isinstance(v, np.ndarray)]
        lengths = {m[1] if k == wrong else k: v for k, v in lengths.items()}
        applied = True
    if m := re.match(r"use '(\w+)' \(the reductions are", hint):
        reduction, applied = m[1], True
    if m := re.search(r"pass (\w+)= its length", hint):  # a group that needs one length: any that divides
        lengths = {**lengths, m[1]: 2}
    assert applied, hint
    return pattern, reduction, lengths


LIBRARY_CASES = [  # (op, pattern, reduction, lengths, shape, what the hint must say)
    # An axis renamed between the sides: both are named, and the rename is offered.
    ("rearrange", "b c h w -> b h w chan", None, {}, (2, 3, 4, 5), "rename 'chan' to 'c': 'b c h w -> b h w c'"),
    ("rearrange", "b c h w -> b hh ww c", None, {}, (2, 3, 4, 5), "rename 'hh' to 'h' and 'ww' to 'w'"),
    ("rearrange", "b (h w) c -> b h w chan", None, {"h": 2}, (2, 6, 5), "'b (h w) c -> b h w c'"),
    ("repeat", "b c -> b chan r", None, {"r": 2}, (2, 3), "rename 'chan' to 'c'"),
    ("reduce", "b chan -> b chn", "sum", {}, (2, 3), "rename 'chn' to 'chan'"),
    ("scatter", "b chan -> m[idx: b] chn", "sum", {"idx": INDEX, "m": 2}, (3, 4), "rename 'chn' to 'chan'"),
    # numpy's letter style: names are words.
    ("einsum", "ij,jk->ik", None, {}, ((2, 3), (3, 4)), "'i j, j k -> i k'"),
    ("einsum", "ii->i", None, {}, ((3, 3),), "'i i -> i'"),
    ("einsum", "...ij,...jk->...ik", None, {}, ((5, 2, 3), (5, 3, 4)), "'... i j, ... j k -> ... i k'"),
    ("einsum", "bhd,bhe->bde", None, {}, ((2, 3, 4), (2, 3, 5)), "'b h d, b h e -> b d e'"),
    # A misspelt length keyword: the axis it names, not its removal (which would be RA301).
    ("rearrange", "b (h w) -> b h w", None, {"hh": 3}, (2, 6), "rename hh= to h="),
    ("repeat", "h -> h c", None, {"cc": 3}, (2,), "rename cc= to c="),  # RA301: the new axis has no length
    ("rearrange", "b (head d) -> b head d", None, {"haed": 2}, (2, 6), "rename haed= to head="),
    # A misspelt reduction.
    ("reduce", "b c -> b", "avg", {}, (2, 3), "use 'mean'"),
    ("reduce", "b c -> b", "Max", {}, (2, 3), "use 'max'"),
    ("reduce", "b c -> b", "maximum", {}, (2, 3), "use 'max'"),
    ("reduce", "b c -> b", "summ", {}, (2, 3), "use 'sum'"),
    ("reduce", "b c -> b", "maen", {}, (2, 3), "use 'mean'"),
    ("scatter", "b c -> m[idx: b] c", "avg", {"idx": INDEX, "m": 2}, (3, 4), "use 'mean'"),
    ("scatter", "b c -> m[idx: b] c", "assign", {"idx": np.array([2, 0, 1]), "m": 3}, (3, 4), "use 'set'"),
    # A misspelt index keyword.
    ("rearrange", "b n[idx] -> b", None, {"idxx": np.array([0, 1])}, (2, 3), "rename it to idx="),
]


CHECK_CASES = [  # (op, pattern, lengths, shape, what the hint says)
    # An input axis that the output writes as a group: every one-sided axis is named, and the group written.
    ("rearrange", "... rd -> ... (r d)", {"r": 2}, (3, 4), "write it '(r d)': '... (r d) -> ... (r d)'"),
    ("rearrange", "... rd -> ... (r d)", {}, (3, 4), "write it '(r d)', and pass r= its length"),
    ("rearrange", "b (h w) -> b hw", {}, (2, 6), "write it '(h w)', and pass h= its length"),
    # The keyword names the output's axis: the input's is renamed.
    ("rearrange", "b (h1 w2) h w -> b (h h2) (w w2)", {"h2": 2}, (2, 6, 3, 4),
     "rename 'h1' to 'h2': 'b (h2 w2) h w -> b (h h2) (w w2)'"),
    ("rearrange", "b c h w -> b h w chan", {}, (2, 3, 4, 5), "rename 'chan' to 'c': 'b c h w -> b h w c'"),
    # One unused keyword beside one axis without a length: the rename, however far the spelling.
    ("repeat", "h -> h c", {"n": 3}, (2,), "rename n= to c="),
    ("repeat", "h -> h c", {"cc": 3}, (2,), "rename cc= to c="),
    ("rearrange", "(h w) -> h w", {"h": 2, "hw": 3}, (6,), "rename hw= to w="),
]
