"""Every code block of README.md and docs/*.md runs as pasted, and every output shown is real.

How a ```python block is read (the convention of the docs; tests/README.md repeats it):

- a block whose first line starts with `>>>` is a doctest: its outputs are compared (whitespace
  normalized; `# doctest:` directives apply);
- any other block is a script, run top to bottom. A ```text block right after it (nothing but blank
  lines between) is what it prints, a ```pytb block the traceback it ends with (`Traceback (most
  recent call last):`, `  ...`, then the exception exactly as Python prints it); both are compared
  exactly;
- the blocks of one file share one namespace, in order, like a notebook's cells (each file starts
  from an empty one), so every name a block uses is defined on that page, above it;
- an HTML comment on the line before a block marks it:
  - `<!-- not run: REASON -->`: not executed, for the reason given (which is required);
  - `<!-- file: PATH -->`: a file that the ```console examples after it run `rearr check` on
    (test_check_options.py runs them);
  - `<!-- rearr check -->`: source for `rearr check`: each comment `# RAnnn MESSAGE` is a finding on
    its line, with that code and message, and the block has no other finding.
  - `<!-- ranks: N -->`: a script for N processes of one process group (torch.distributed), which
    tests/backends/test_dtensor.py runs on N gloo processes (tests/_gloo.py): a ```text block right
    after it is what every rank prints, compared exactly;
  - `<!-- devices: N -->`: a jax script for a process with N devices, which
    tests/backends/test_jax_sharded.py runs with N forced host devices: a ```text block right after it
    is what it prints, compared exactly.

A page whose blocks import torch, jax, dask or array-api-strict is skipped only where that framework
is not installed (CI installs them all). The tests also keep internal project text out of the user
docs, keep the error tables complete, and run the pre-commit snippet of docs/check.md.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
import traceback
from pathlib import Path

import pytest
from _docs_blocks import ALL, PAGES, ROOT, Block, blocks, python_blocks

from rearr.errors import CODES

OPTIONAL = ("torch", "jax", "dask", "array_api_strict", "array_api_compat")
TRACEBACK = "Traceback (most recent call last):\n  ...\n"
RUN_PAGES = [p for p in PAGES if any(b.kind in ("script", "doctest") for b in python_blocks(p))]


def _missing_frameworks(page: Path) -> list[str]:
    imported = set(re.findall(r"^(?:>>> |\.\.\. )?\s*(?:import|from) (\w+)",
                              "".join(b.body for b in python_blocks(page) if b.kind in ("script", "doctest")), re.M))
    return [name for name in OPTIONAL if name in imported and importlib.util.find_spec(name) is None]


def _padded(block: Block) -> str:
    """The block's code at its own line numbers, so that a traceback points into the page."""
    return "\n" * (block.line - 1) + block.body


def _claim(comment: str) -> tuple[bool, object]:
    """What a trailing comment says an expression gives: the comment, or its part after the last ': ',
    read as a Python literal (`# (2, 12)`, `# split and merge: (2, 6, 2)`, `# [1., 5.]`); (False, None)
    for a comment that is prose."""
    text = comment.lstrip("#").strip()
    for candidate in (text, text.rpartition(": ")[2]):
        try:
            return True, ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return False, None


def _holds(value: object, claim: object) -> bool:
    """A tuple of ints claims a tensor's shape, a list its values; anything else is compared with ==."""
    if hasattr(value, "shape") and isinstance(claim, tuple) and all(isinstance(n, int) for n in claim):
        return tuple(value.shape) == claim
    if hasattr(value, "shape") and isinstance(claim, list):
        import numpy as np

        from rearr import asnumpy

        got = np.asarray(asnumpy(value))
        return got.shape == np.shape(claim) and bool(np.allclose(got, claim))
    return bool(value == claim)


def _claims_checked(block: Block) -> tuple[ast.Module, list[tuple[object, str]]]:
    """The block's code, each top-level expression whose comment claims its value wrapped in
    `__claim__(value, i)`, and the claims (the statements and their order are the block's own)."""
    source = _padded(block)
    tree = ast.parse(source, str(block.page))
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    claims: list[tuple[object, str]] = []
    for stmt in tree.body:
        claimed, claim = _claim(comments.get(stmt.end_lineno, "")) if isinstance(stmt, ast.Expr) else (False, None)
        if claimed:
            claims.append((claim, f"{block.page.relative_to(ROOT)}:{stmt.end_lineno}"))
            stmt.value = ast.Call(ast.Name("__claim__", ast.Load()), [stmt.value, ast.Constant(len(claims) - 1)], [])
    return ast.fix_missing_locations(tree), claims


def _run_script(block: Block, namespace: dict) -> None:
    tree, claims = _claims_checked(block)

    def check(value: object, i: int) -> None:
        claim, where = claims[i]
        assert _holds(value, claim), f"{where}: the comment says {claim!r}, the line gives {value!r}"

    namespace["__claim__"] = check
    code = compile(tree, str(block.page), "exec")
    out = io.StringIO()
    expected = block.output
    try:
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
    except Exception as e:
        if expected is None or expected.lang != "pytb":
            raise AssertionError(f"{block.where}: the block raised") from e
        assert expected.body.startswith(TRACEBACK), f"{expected.where}: a pytb block starts with {TRACEBACK!r}"
        assert "".join(traceback.format_exception_only(e)) == expected.body[len(TRACEBACK):], expected.where
        return
    assert expected is None or expected.lang != "pytb", f"{block.where}: the block was to raise, and did not"
    if expected is not None:
        assert out.getvalue() == expected.body, f"{expected.where}: not what the block above prints"
    else:
        sys.stdout.write(out.getvalue())


def _run_doctest(block: Block, namespace: dict) -> int:
    test = doctest.DocTestParser().get_doctest(_padded(block), {}, block.where, str(block.page), 0)
    test.globs = namespace  # get_doctest copies its globs: share the page's namespace
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    runner.run(test, out=failures.append, clear_globs=False)
    assert runner.failures == 0, "".join(failures)
    return len(test.examples)


@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_every_python_block_runs_as_pasted(page: Path):
    missing = _missing_frameworks(page)
    if missing:
        pytest.skip(f"{page.name} needs {', '.join(missing)}")
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    for block in python_blocks(page):
        if block.kind == "script":
            _run_script(block, namespace)
            ran += 1
        elif block.kind == "doctest":
            ran += _run_doctest(block, namespace) > 0
    assert ran > 0


def test_every_python_block_is_run_checked_or_marked_with_a_reason():
    kinds = {"script", "doctest", "not run", "file", "rearr check", "ranks", "devices"}
    for block in ALL:
        assert block.kind in kinds, f"{block.where}: unknown marker <!-- {block.marker} -->"
        if block.kind == "not run":
            assert block.marker.partition(":")[2].strip(), f"{block.where}: a block not run says why"
    not_run = [b for b in ALL if b.kind == "not run"]
    assert len(not_run) <= 2, [b.where for b in not_run]  # a block that cannot run is the exception
    # The pages' blocks were found (a parser that found none would make the tests above pass).
    assert sum(b.kind == "script" for b in python_blocks(ROOT / "README.md")) >= 8
    assert sum(b.body.count(">>> ") for b in python_blocks(ROOT / "docs" / "language.md")) >= 150


def test_output_blocks_follow_a_script():
    """A ```pytb block anywhere is the output of the script above it (else it would be compared with nothing)."""
    for page in PAGES:
        for block in blocks(page):
            assert block.lang != "pytb", f"{block.where}: a pytb block must follow a ```python script"


# --- `rearr check` blocks ---------------------------------------------------------------------

_FINDING = re.compile(r"#\s*(RA\d{3})\b(.*)$")


@pytest.mark.parametrize("block", [b for b in ALL if b.kind == "rearr check"],
                         ids=lambda b: b.where)
def test_rearr_check_blocks_find_what_their_comments_say(block: Block):
    from rearr.tools import lint

    einops = "--einops" in block.marker
    expected = {}
    for number, line in enumerate(block.body.splitlines(), 1):
        m = _FINDING.search(line)
        if m:
            expected[number] = f"{m[1]} {m[2].strip()}".strip()
    found = {p.line: f"{p.code} {p.message}" for p in lint.check_source(block.body, einops=einops)}
    assert found == expected, block.where
    assert expected, f"{block.where}: a rearr check block shows at least one finding"


# --- no internal project text; the error tables -------------------------------------------------

INTERNAL = re.compile(r"DESIGN\.md|\bissues? #?\d+|/work/|\.\./shared|\bthe issue asked", re.I)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_user_docs_carry_no_internal_project_text(page: Path):
    text = page.read_text(encoding="utf-8")
    hits = [f"{page.name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}" for m in INTERNAL.finditer(text)]
    assert not hits, hits


def test_the_reference_lists_every_error_code():
    """docs/language.md's table holds every code of rearr.errors.CODES (docs/check.md's is compared with
    the meanings in test_check.py)."""
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Errors\n"):text.index("\n## Decisions\n")]
    assert re.findall(r"^\| (RA\d{3}) \|", section, re.M) == sorted(CODES)


def test_every_code_rearr_raises_is_in_the_table():
    used = set()
    for path in (ROOT / "rearr").rglob("*.py"):
        used |= set(re.findall(r"\"(RA\d{3})\"", path.read_text(encoding="utf-8")))
    assert used == set(CODES)


# --- pre-commit -----------------------------------------------------------------------------------

BAD = 'import rearr\n\nrearr.rearrange(None, "b c -> b c d")\n'
SLOW = pytest.mark.skipif(os.environ.get("REARR_SLOW_TESTS") != "1",
                          reason="pre-commit builds a virtual environment and installs rearr into it; "
                                 "set REARR_SLOW_TESTS=1 (.ci/run does)")


def precommit_configs() -> list[str]:
    """The ```yaml blocks of docs/check.md's pre-commit section."""
    text = (ROOT / "docs" / "check.md").read_text(encoding="utf-8")
    section = text[text.index("\n## pre-commit\n"):text.index("\n## GitHub Actions\n")]
    return re.findall(r"^```yaml\n(.*?)^```", section, re.S | re.M)


def test_the_pre_commit_snippets_name_the_repository_and_a_real_rev():
    hooks = re.findall(r"^- id: (\S+)", (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"), re.M)
    assert hooks == ["rearr-check", "rearr-check-einops"]
    commit, tag = precommit_configs()
    for config in (commit, tag):
        assert "repo: https://github.com/rearr-dev/rearr\n" in config, config
        assert re.search(r"- id: (\S+)", config)[1] in hooks
    sha = re.search(r"^\s+rev: ([0-9a-f]{40})\b", commit, re.M)  # a commit: works before any release
    assert sha, commit
    assert re.search(r"^\s+rev: v\d+\.\d+\.\d+\b", tag, re.M), tag  # the tag form, for releases
    if (ROOT / ".git").exists():  # the commit is rearr's, and has the hooks
        _git("cat-file", "-e", f"{sha[1]}:.pre-commit-hooks.yaml", cwd=ROOT)


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _pre_commit() -> list[str]:
    exe = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which("pre-commit")
    if exe is None:
        pytest.skip("pre-commit is not installed (it is in the test extra)")
    return [exe]


def _pre_commit_run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """pre-commit ARGS in a new git repository holding one file with a bad pattern."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    work = tmp_path / "project"
    work.mkdir()
    (work / "model.py").write_text(BAD, encoding="utf-8")
    _git("init", "-q", cwd=work)
    _git("add", "model.py", cwd=work)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([*_pre_commit(), *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return done


FINDING = "model.py:3:35: RA200 axis 'd' appears only on the output side of rearrange"


@SLOW
@pytest.mark.slow
def test_pre_commit_try_repo_runs_the_hook(tmp_path: Path):
    """`pre-commit try-repo` on this checkout (its uncommitted changes included) builds the hook's
    environment (pip installs rearr) and runs it: a bad pattern fails with its finding."""
    done = _pre_commit_run(["try-repo", str(ROOT), "rearr-check", "--files", "model.py"], tmp_path)
    assert FINDING in done.stdout, done.stdout


@SLOW
@pytest.mark.slow
def test_the_docs_commit_snippet_runs(tmp_path: Path):
    """docs/check.md's first snippet, with its URL pointed at this checkout (these machines have no
    network) and without the optional language_version: pre-commit installs the commit it names."""
    config = precommit_configs()[0].replace("https://github.com/rearr-dev/rearr", str(ROOT))
    config = re.sub(r"^\s+language_version:.*\n", "", config, flags=re.M)
    (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    done = _pre_commit_run(["run", "-c", str(tmp_path / "config.yaml"), "--files", "model.py"], tmp_path)
    assert FINDING in done.stdout, done.stdout


def test_the_test_extra_installs_pre_commit():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"pre-commit' in re.search(r"^test = \[(.*)\]$", text, re.M)[1]


def test_a_comment_that_claims_a_value_is_checked():
    page = ROOT / "README.md"
    claims = [claim for b in python_blocks(page) if b.kind == "script" for claim in _claims_checked(b)[1]]
    assert len(claims) >= 15, claims  # the tour's `# (2, 12)` comments were found
    wrong = Block(page, "python", "import numpy as np\nnp.ones((2, 3))  # a (2, 3) array: (3, 2)\n", 1)
    with pytest.raises(AssertionError, match="the block raised") as info:
        _run_script(wrong, {})
    assert "the comment says (3, 2)" in str(info.value.__cause__)
    _run_script(Block(page, "python", "2 + 2  # four: 4\nprint('x')  # prose, no claim\n", 1,
                      output=Block(page, "text", "x\n", 4)), {})
