"""`rearr check --fix`, `--diff`, `--add-noqa`, the file's `# rearr: noqa` and RA010 (unused noqa).

Every fix is applied and the fixed call is run: in a file of failing calls, `--fix` leaves calls that
run as they were (byte for byte), and every call it edits then runs, with rearr and with einops, to the
result that the hint means."""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path

import einops
import numpy as np
import pytest
from _cli import run
from _hints import CHECK_CASES as HINT_CASES
from _hints import LIBRARY_CASES as DID_YOU_MEAN

import rearr
from rearr.tools import fix, lint

# Calls that fail, each in a function of x (and the tensors it names), with the fixed call's result.
FAILING = '''
import einops
import numpy as np
import rearr

x = np.arange(24.0).reshape(2, 3, 4)
a, b = np.ones((2, 3)), np.ones((3, 5))
x2 = np.arange(6.0).reshape(2, 3)
idx = np.array([0, 2])


def renamed_axis():
    return rearr.rearrange(x, "b c h -> b h chan")


def letter_einsum():
    return rearr.einsum(a, b, "ij,jk->ik")


def keyword():
    return rearr.rearrange(x, "b c (h w) -> b c h w", hw=2)


def repeat_length():
    return rearr.repeat(x, "b c h -> b c h r", n=3)


def index_keyword():
    return rearr.rearrange(x2, "b n[i] -> b", ii=idx)


def einops_group():
    return einops.rearrange(x, "b c hw -> b c (h w)", h=2)


def both_sides():
    return rearr.rearrange(x, "b c (h1 w) -> b c h2 w", h2=2)


def fine():
    return rearr.rearrange(x, "b c h -> b (c h)")  # runs: never edited


def silenced():
    return rearr.rearrange(x, "b c h -> b h")  # noqa: RA200
'''

FIXED = {  # what each function computes once fixed
    "renamed_axis": lambda x, a, b, idx: np.transpose(x, (0, 2, 1)),
    "letter_einsum": lambda x, a, b, idx: a @ b,
    "keyword": lambda x, a, b, idx: x.reshape(2, 3, 2, 2),
    "repeat_length": lambda x, a, b, idx: np.repeat(x[..., None], 3, axis=-1),
    "index_keyword": lambda x, a, b, idx: np.array([0.0, 5.0]),  # x2[b, idx[b]]
    "einops_group": lambda x, a, b, idx: x,
    "both_sides": lambda x, a, b, idx: x.reshape(2, 3, 2, 2),
    "fine": lambda x, a, b, idx: x.reshape(2, 12),
}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"fixed_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_fix_gives_a_call_that_runs_and_correct_calls_are_untouched(tmp_path):
    path = tmp_path / "calls.py"
    path.write_text(FAILING)
    before = lint.check_file(str(path))
    assert {p.code for p in before} <= {"RA200", "RA300", "RA301"} and len(before) == 7
    proc = run("check", "--fix", "calls.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Fixed 7 problems; all checks passed")
    fixed = path.read_text()
    old_lines, new_lines = FAILING.splitlines(), fixed.splitlines()
    assert len(old_lines) == len(new_lines)
    for old, new in zip(old_lines, new_lines):  # only the failing calls' lines changed
        assert old == new or ("rearr." in old or "einops." in old) and "fine" not in old and "noqa" not in old
    assert "def fine():\n    return rearr.rearrange(x, \"b c h -> b (c h)\")  # runs: never edited" in fixed
    assert 'rearr.rearrange(x, "b c h -> b h")  # noqa: RA200' in fixed  # a silenced finding is not fixed
    module = load(path)
    inputs = (module.x, module.a, module.b, module.idx)
    for name, expected in FIXED.items():
        got = getattr(module, name)()
        np.testing.assert_array_equal(got, expected(*inputs), err_msg=name)


@pytest.mark.parametrize("case", [*DID_YOU_MEAN, *((op, p, None, lengths, shape, says)
                                                   for op, p, lengths, shape, says in HINT_CASES)])
def test_each_literal_hint_of_the_hint_tables_is_fixed_and_the_call_runs(tmp_path, case):
    op, pattern, reduction, lengths, shape, _ = case
    tensors = len(shape) if op == "einsum" else 0
    names = [f"t{i}" for i in range(tensors)] or ["x"]
    keywords = "".join(f", {k}={'idx' if isinstance(v, np.ndarray) else repr(v)}" for k, v in lengths.items())
    reduction_arg = "" if reduction is None else f", {reduction!r}"
    call = f"rearr.{op}({', '.join(names)}, {pattern!r}{reduction_arg}{keywords})"
    source = f"import rearr\n\n\ndef f({', '.join(names)}, idx=None):\n    return {call}\n"
    (problem,) = lint.check_source(source)
    fixed, applied, left = fix.fixed(source, lambda s: lint.check_source(s))
    if not problem.fix:  # the hint asks for a value, or names another function: nothing is applied
        assert applied == 0 and fixed == source
        return
    assert applied >= 1 and left == []
    namespace: dict = {}
    exec(compile(fixed, "fixed.py", "exec"), namespace)
    index = next((v for v in lengths.values() if isinstance(v, np.ndarray)), None)
    if op == "einsum":
        arrays = [np.ones(s) for s in shape]
    else:
        arrays = [np.arange(float(np.prod(shape))).reshape(shape)]
    namespace["f"](*arrays, idx=index)  # runs


def test_diff_writes_nothing_and_says_whether_there_is_something_to_fix(tmp_path):
    path = tmp_path / "calls.py"
    path.write_text(FAILING)
    proc = run("check", "--diff", "calls.py", cwd=tmp_path)
    assert proc.returncode == 1 and path.read_text() == FAILING
    assert proc.stdout.startswith("--- a/calls.py\n+++ b/calls.py\n")
    assert '-    return rearr.einsum(a, b, "ij,jk->ik")\n+    return rearr.einsum(a, b, "i j, j k -> i k")' in \
        proc.stdout
    assert proc.stderr == "Would fix 7 problems in 1 file.\n"
    (tmp_path / "ok.py").write_text("import rearr\nrearr.rearrange(x, 'b c -> c b')\n")
    proc = run("check", "--diff", "ok.py", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "")


@pytest.mark.parametrize("prefix, end", [("", "\n"), ("\ufeff", "\r\n"), ("", "\r")])
def test_fix_keeps_the_bom_and_the_line_ends(tmp_path, prefix, end):
    lines = ["import rearr", "rearr.rearrange(x, 'b c -> b chan')", "y = 'é'"]
    data = (prefix + end.join(lines) + end).encode("utf-8")
    (tmp_path / "m.py").write_bytes(data)
    assert run("check", "--fix", "m.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "m.py").read_bytes() == data.replace(b"b chan'", b"b c'")


def test_fix_on_stdin_writes_the_fixed_source_to_stdout(tmp_path):
    proc = run("check", "--fix", "-", cwd=tmp_path,
               stdin="import rearr\nrearr.rearrange(x, 'b c -> b chan')\nrearr.repeat(x, 'b -> b r')\n")
    assert proc.stdout == "import rearr\nrearr.rearrange(x, 'b c -> b c')\nrearr.repeat(x, 'b -> b r')\n"
    assert proc.returncode == 1 and proc.stderr.startswith("-:3:25: RA301 the new axis 'r' has no length")


def test_a_file_that_cannot_be_written_is_exit_2(tmp_path):
    if os.name != "posix" or os.geteuid() == 0:
        pytest.skip("permissions as a user on POSIX")
    path = tmp_path / "m.py"
    path.write_text("import rearr\nrearr.rearrange(x, 'b c -> b chan')\n")
    path.chmod(0o444)
    proc = run("check", "--fix", "m.py", cwd=tmp_path)
    assert proc.returncode == 2 and "m.py: cannot write the fixes: Permission denied" in proc.stderr


# --- --add-noqa ------------------------------------------------------------------------------


def test_add_noqa_silences_every_finding_where_a_comment_can_stand(tmp_path):
    source = ('import rearr\n'
              'rearr.rearrange(x, "b c -> c")  # noqa: RA301\n'
              'y = rearr.rearrange(\n    x, """b c\n -> c""")\n'
              'z = 1 + \\\n    rearr.rearrange(x, "b c -> c") + rearr.repeat(x, "b -> b r")\n'
              'w = rearr.rearrange(x, "b c -> c")  # type: ignore\n')
    (tmp_path / "m.py").write_text(source)
    proc = run("check", "--add-noqa", "m.py", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "Added 4 noqa comments to 1 file.\n")
    assert (tmp_path / "m.py").read_text() == (
        'import rearr\n'
        'rearr.rearrange(x, "b c -> c")  # noqa: RA200, RA301\n'
        'y = rearr.rearrange(\n    x, """b c\n -> c""")  # noqa: RA200\n'
        'z = 1 + \\\n    rearr.rearrange(x, "b c -> c") + rearr.repeat(x, "b -> b r")  # noqa: RA200, RA301\n'
        'w = rearr.rearrange(x, "b c -> c")  # type: ignore  # noqa: RA200\n')
    assert run("check", "-q", "m.py", cwd=tmp_path).stdout == ""
    # The comment that was there named RA301, which silences nothing: RA010 says so, the new codes are used.
    assert run("check", "-q", "--extend-select", "RA010", "m.py", cwd=tmp_path).stdout == \
        "m.py:2:33: RA010 unused noqa: RA301 silences nothing on this line (fix: remove RA301 from it)\n"


@pytest.mark.parametrize("args, says", [
    (["--add-noqa", "-"], "--add-noqa writes the files it checks"),
    (["--fix", "--diff", "."], "--fix, --diff and --add-noqa do one thing each"),
    (["--fix", "--add-noqa", "."], "--fix, --diff and --add-noqa do one thing each"),
])
def test_the_editing_options_that_do_not_go_together(tmp_path, args, says):
    (tmp_path / "m.py").write_text("import rearr\n")
    proc = run("check", *args, cwd=tmp_path, stdin="")
    assert proc.returncode == 2 and says in proc.stderr and proc.stdout == ""


# --- # rearr: noqa, RA010 ----------------------------------------------------------------------

BAD = "rearr.rearrange(x, 'b c -> c')\nrearr.reduce(x, 'b c -> b', 'avg')\n"


@pytest.mark.parametrize("comment, left", [
    ("# rearr: noqa", []),
    ("# rearr: noqa: RA200", ["RA400"]),
    ("# rearr:noqa:ra400", ["RA200"]),
    ("#rearr: noqa: RA200, RA400", []),
    ("# noqa", ["RA200", "RA400"]),  # on its own line, a line's noqa silences that line only
    ("# rearr: no qa", ["RA200", "RA400"]),
])
def test_a_noqa_for_the_whole_file(comment, left):
    for source in (f"import rearr\n{comment}\n{BAD}", f"import rearr\n{BAD}x = 1  {comment}\n"):
        assert [p.code for p in lint.check_source(source)] == left


def test_the_files_noqa_does_not_silence_a_file_that_cannot_be_checked(tmp_path):
    (tmp_path / "m.py").write_text("import rearr  # rearr: noqa\ndef f(:\n")
    assert run("check", "m.py", cwd=tmp_path).returncode == 2


@pytest.mark.parametrize("source, found", [
    ("rearr.rearrange(x, 'b c -> c')  # noqa: RA200", []),
    ("rearr.rearrange(x, 'b c -> c b')  # noqa: RA200", [(2, 35, "unused noqa: RA200 silences nothing on this line")]),
    ("rearr.rearrange(x, 'b c -> c')  # noqa: RA200, RA301",
     [(2, 33, "unused noqa: RA301 silences nothing on this line")]),
    ("rearr.rearrange(x, 'b c -> c b')  # noqa: RA200, RA301",
     [(2, 35, "unused noqa: RA200, RA301 silence nothing on this line")]),
    ("rearr.rearrange(x, 'b c -> c b')  # noqa", []),  # bare: it may be another tool's
    ("rearr.rearrange(x, 'b c -> c b')  # noqa: E501", []),  # not rearr's codes
    ("rearr.rearrange(x, 'b c -> c b')  # noqa: RA200, RA010", []),  # it silences its own report
    ("# rearr: noqa\nrearr.rearrange(x, 'b c -> c b')", [(2, 1, "unused noqa: # rearr: noqa silences nothing in "
                                                             "this file")]),
    ("# rearr: noqa: RA400\nrearr.rearrange(x, 'b c -> c')  # noqa: RA200",
     [(2, 1, "unused noqa: RA400 silences nothing in this file")]),
])
def test_unused_noqa_is_RA010(source, found):
    problems = lint.check_source(f"import rearr\n{source}\n", unused_noqa=True)
    assert [(p.line, p.col, p.message) for p in problems if p.code == "RA010"] == found
    assert all(p.code != "RA010" for p in lint.check_source(f"import rearr\n{source}\n"))


def test_RA010_is_selected_only_when_asked_and_fix_removes_the_codes(tmp_path):
    source = ("import rearr\n"
              "rearr.rearrange(x, 'b c -> c b')  # noqa: RA200\n"
              "rearr.rearrange(x, 'b c -> c')  # noqa: RA200, RA301\n"
              "rearr.rearrange(x, 'b c -> c b')  # type: ignore  # noqa: RA301\n"
              "rearr.rearrange(x, 'b c -> c b')  # noqa: RA301 kept for later\n")
    (tmp_path / "m.py").write_text(source)
    assert run("check", "m.py", cwd=tmp_path).returncode == 0
    proc = run("check", "-q", "--extend-select", "RA010", "m.py", cwd=tmp_path)
    assert [line.split()[1] for line in proc.stdout.splitlines()] == ["RA010"] * 4
    assert run("check", "--extend-select", "RA010", "--fix", "m.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "m.py").read_text() == ("import rearr\n"
                                               "rearr.rearrange(x, 'b c -> c b')\n"
                                               "rearr.rearrange(x, 'b c -> c')  # noqa: RA200\n"
                                               "rearr.rearrange(x, 'b c -> c b')  # type: ignore\n"
                                               "rearr.rearrange(x, 'b c -> c b')  # kept for later\n")


def test_fixes_that_overlap_are_applied_one_at_a_time():
    source = "abcdef\n"
    assert fix.apply(source, [((1, 2, 1, 4, "X"),), ((1, 3, 1, 5, "Y"),), ((1, 5, 1, 6, "Z"),)]) == ("aXdZf\n", 2)


@pytest.mark.parametrize("seed", range(3))
def test_fixing_random_calls_never_breaks_one_that_runs(tmp_path, seed):
    """Random calls of rearrange, some valid, some with a misspelt name: after --fix, each valid call's line
    is unchanged, and each call that runs in rearr runs in einops to the same result."""
    rng = np.random.default_rng(seed)
    x = np.arange(24.0).reshape(2, 3, 4)
    axes = ["b", "c", "h"]
    lines = []
    for i in range(40):
        out = list(rng.permutation(axes))
        if rng.random() < 0.5:
            out[rng.integers(3)] += "x"  # a one-sided axis: rename it back
        lines.append(f"    r{i} = rearr.rearrange(x, 'b c h -> {' '.join(out)}')")
    source = "import rearr\n\n\ndef f(x):\n" + "\n".join(lines) + "\n    return locals()\n"
    (tmp_path / "r.py").write_text(source)
    run("check", "--fix", "r.py", cwd=tmp_path)
    fixed = (tmp_path / "r.py").read_text().splitlines()
    for old, new in itertools.zip_longest(source.splitlines(), fixed):
        if "x'" not in old.split("->")[-1] and "x " not in old.split("->")[-1]:
            assert old == new  # a valid call is never edited
    results = load(tmp_path / "r.py").f(x)
    for i in range(40):
        pattern = fixed[4 + i].split("'")[1]
        np.testing.assert_array_equal(results[f"r{i}"], einops.rearrange(x, pattern))
        np.testing.assert_array_equal(results[f"r{i}"], rearr.rearrange(x, pattern))
