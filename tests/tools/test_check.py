"""`rearr check` (rearr/tools/lint.py) and the `rearr` command line (rearr/tools/cli.py).

The fixture files under tests/fixtures/check mark each expected finding on its line:
`# expect: RA200@23` (code and 1-based character column; `RA103@15:5` names the line too, for a
literal that starts on another line), or `# expect-einops:` for findings in einops' calls (checked
by default; --no-einops turns them off).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import random
import re
import subprocess
import sys

import pytest
from _cli import REPO, git_repository, run

from rearr.errors import CODES, RearrError
from rearr.rules import layer_recipe
from rearr.rules.recipe import UNKNOWN
from rearr.tools import cli, lint, report

FIXTURES = REPO / "tests" / "fixtures" / "check"
TEXT_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>RA\d{3}) (?P<text>.+)$")
GITHUB_LINE = re.compile(r"^::error (?P<props>[^:]*)::(?P<data>.*)$")


SUMMARY = re.compile(r"^(Found [\d,]+ problems? in [\d,]+ files?|All checks passed|No problem found) "
                     r"\([\d,]+ files?, (?:[\d,]+ einops and [\d,]+ rearr|[\d,]+ (?:einops|rearr)|0) patterns? "
                     r"checked\)\.( [\d,]+ paths? could not be read\.)?$")


def findings(proc: subprocess.CompletedProcess) -> list[str]:
    """The text output's findings: its lines but the summary line, which ends it."""
    lines = proc.stdout.splitlines()
    assert lines and SUMMARY.match(lines[-1]), proc.stdout
    return lines[:-1]


def expected(einops: bool) -> set[tuple[str, int, int, str]]:
    """(path, line, col, code) of every finding that the fixtures' comments announce."""
    marker = re.compile(r"# (expect|expect-einops): ((?:RA\d{3}@[\d:]+ ?)+)")
    found = set()
    for path in sorted(FIXTURES.rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = marker.search(line)
            if m and (m.group(1) == "expect" or einops):
                for item in m.group(2).split():
                    code, _, where = item.partition("@")
                    at_line, _, col = where.rpartition(":")
                    found.add((path.relative_to(REPO).as_posix(), int(at_line or lineno), int(col), code))
    return found


def as_json(*args: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    proc = run("check", "--format", "json", *args)
    return json.loads(proc.stdout), proc


def positions(problems) -> set[tuple[str, int, int, str]]:
    return {(p["path"], p["line"], p["col"], p["code"]) for p in problems}


def check(source: str, einops: bool = False) -> list[tuple[int, int, str]]:
    return [(p.line, p.col, p.code) for p in lint.check_source(source, "t.py", einops=einops)]


def at(source: str, *expected: tuple[int, str, str]) -> list[tuple[int, int, str]]:
    """(line, code, needle) -> (line, column of the needle's first character, code): columns counted
    from the text itself, not by hand."""
    lines = source.splitlines()
    for line, _, needle in expected:
        assert lines[line - 1].count(needle) == 1, (line, needle)
    return [(line, lines[line - 1].index(needle) + 1, code) for line, code, needle in expected]


# --- the fixtures, end to end ---------------------------------------------------------------


@pytest.mark.parametrize("einops", [False, True])
def test_fixture_findings_are_exactly_the_marked_ones(einops):
    problems, proc = as_json("tests/fixtures/check", *([] if einops else ["--no-einops"]))
    assert proc.returncode == 1, proc.stderr
    assert positions(problems) == expected(einops)
    assert len(expected(einops)) == len(problems) >= 25  # no finding twice, and the markers were read


@pytest.mark.parametrize("flag", ["--no-einops", "--einops"])
def test_good_files_are_clean(flag):
    proc = run("check", "--quiet", "tests/fixtures/check/good", flag)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_json_objects_have_exactly_the_documented_keys():
    problems, _ = as_json("tests/fixtures/check/bad/forms.py")
    keys = {"path", "line", "col", "end_line", "end_col", "code", "message", "hint", "pattern", "fix"}
    assert all(set(p) == keys for p in problems)
    first = problems[0]
    assert first == {
        "path": "tests/fixtures/check/bad/forms.py", "line": 8, "col": 23, "end_line": 8, "end_col": 24,
        "code": "RA200", "message": "axis 'c' appears only on the input side and 'd' only on the output side of "
        "rearrange", "hint": "if the output's 'd' is the input's 'c', rename 'd' to 'c': 'b c -> b c'",
        "pattern": "b c -> b d",
        "fix": {"edits": [{"line": 8, "col": 21, "end_line": 8, "end_col": 31, "text": "b c -> b c"}]},
    }
    assert problems[1]["fix"] is None  # 'pass its length': a value to choose


def test_text_format_says_what_json_says():
    problems, _ = as_json("tests/fixtures/check")
    proc = run("check", "tests/fixtures/check")
    lines = findings(proc)
    assert proc.returncode == 1 and len(lines) == len(problems)
    for line, p in zip(lines, problems):
        m = TEXT_LINE.match(line)
        assert m, line
        fix = f" (fix: {p['hint']})" if p["hint"] else ""
        assert m.groupdict() == {"path": p["path"], "line": str(p["line"]), "col": str(p["col"]),
                                 "code": p["code"], "text": p["message"] + fix}


def _unescape(text: str) -> str:
    return re.sub(r"%(25|0D|0A|3A|2C)", lambda m: bytes.fromhex(m.group(1)).decode(), text)


def parse_github(out: str) -> list[tuple[dict[str, str], str]]:
    """Each annotation's properties and message, unescaped as the runner does."""
    result = []
    for line in out.splitlines():
        m = GITHUB_LINE.match(line)
        assert m, line
        props = dict(item.split("=", 1) for item in m.group("props").split(","))
        result.append(({k: _unescape(v) for k, v in props.items()}, _unescape(m.group("data"))))
    return result


def test_github_format_says_what_json_says():
    problems, _ = as_json("tests/fixtures/check")
    proc = run("check", "--format", "github", "tests/fixtures/check")
    annotations = parse_github(proc.stdout)
    assert proc.returncode == 1 and len(annotations) == len(problems)
    for (props, message), p in zip(annotations, problems):
        assert props["file"] == p["path"] and props["title"] == f"rearr {p['code']}"
        assert (int(props["line"]), int(props["endLine"])) == (p["line"], p["end_line"])
        if p["line"] == p["end_line"]:
            assert (int(props["col"]), int(props["endColumn"])) == (p["col"], p["end_col"])
        else:  # the runner refuses columns on an annotation that spans lines
            assert "col" not in props and "endColumn" not in props
        assert message == p["message"] + (f" (fix: {p['hint']})" if p["hint"] else "")
    assert any(p["line"] != p["end_line"] for p in problems)  # the multi-line literal in columns.py


def test_github_escapes_workflow_command_data():
    p = lint.Problem("a,b:c%.py", 3, 4, 3, 5, "RA100", "50% of 'a:b',\r\nmore", "x, y")
    out = report.format_github([p])
    assert out == ("::error file=a%2Cb%3Ac%25.py,line=3,col=4,endLine=3,endColumn=5,title=rearr RA100"
                   "::50%25 of 'a:b',%0D%0Amore (fix: x, y)")
    assert parse_github(out) == [({"file": "a,b:c%.py", "line": "3", "col": "4", "endLine": "3", "endColumn": "5",
                                   "title": "rearr RA100"}, "50% of 'a:b',\r\nmore (fix: x, y)")]


# --- exit codes, unreadable input -----------------------------------------------------------


def test_exit_2_for_a_missing_path_and_the_rest_is_checked():
    proc = run("check", "no/such/dir", "tests/fixtures/check/einops")
    assert proc.returncode == 2
    assert "no/such/dir: no such file or folder" in proc.stderr
    assert proc.stdout.startswith("tests/fixtures/check/einops/bad_einops.py:7:24: RA200 ")


@pytest.mark.parametrize("args", [["check", "--format", "xml"], ["check", "--nope"], ["frobnicate"], []])
def test_exit_2_for_bad_usage(args):
    proc = run(*args)
    assert proc.returncode == 2 and "usage: rearr" in proc.stderr and proc.stdout == ""


def test_syntax_error_and_non_utf8_are_reported_and_the_rest_is_checked(tmp_path):
    (tmp_path / "a_broken.py").write_text("import rearr\ns = 'é→'; x = (1 +* 2)\n", encoding="utf-8")
    (tmp_path / "b_latin1.py").write_bytes(b"import rearr\n# caf\xe9\nrearr.rearrange(x, 'b c -> b d')\n")
    (tmp_path / "c_bad.py").write_text("import rearr\nrearr.rearrange(x, 'b c -> b d')\n", encoding="utf-8")
    (tmp_path / "d_nul.py").write_bytes(b"import rearr\nx = 1\0\n")
    proc = run("check", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    got = [(p["path"], p["line"], p["col"], p["code"]) for p in json.loads(proc.stdout)]
    assert got == [
        ("a_broken.py", 2, 19, "RA001"),  # characters: the '*' after 'é→', not its byte offset
        ("b_latin1.py", 2, 6, "RA002"),  # the line, and the first bad byte counted in bytes
        ("c_bad.py", 2, 23, "RA200"),
        ("d_nul.py", 1, 1, "RA001"),
    ]
    messages = {p["path"]: p["message"] for p in json.loads(proc.stdout)}
    python = "Python {}.{}.{}".format(*sys.version_info[:3])  # the message says which Python parsed the file
    assert messages["a_broken.py"] == f"{python} cannot parse the file: invalid syntax"
    assert messages["b_latin1.py"] == "the file is not UTF-8 (byte 0xe9)"


def test_unreadable_file_and_folder_exit_2(tmp_path):
    if os.name != "posix" or os.geteuid() == 0:
        pytest.skip("needs a user that file permissions apply to")
    (tmp_path / "secret.py").write_text("x = 1\n")
    (tmp_path / "secret.py").chmod(0)
    (tmp_path / "closed").mkdir(mode=0)
    proc = run("check", ".", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == "secret.py:1:1: RA002 cannot read the file: Permission denied\n"
    assert "rearr check: ./closed: Permission denied" in proc.stderr


def test_a_directory_that_cannot_be_read_is_reported_by_check_file():
    [problem] = lint.check_file(str(FIXTURES))  # a folder is not a file
    assert (problem.code, problem.message) == ("RA002", "not a regular file (a folder): not read")


def test_bom_and_line_ends(tmp_path):
    # A BOM is not a column; CRLF and lone CR end lines for ast, and so for the reported lines.
    body = ["import rearr", "", "rearr.rearrange(x, 'b c -> b d')"]
    for name, data in {"bom.py": "\ufeff" + "\n".join(body), "crlf.py": "\r\n".join(body),
                       "cr.py": "\r".join(body)}.items():
        (tmp_path / name).write_bytes(data.encode("utf-8"))
        assert [(p.line, p.col, p.code) for p in lint.check_file(str(tmp_path / name))] == [(3, 23, "RA200")], name


# --- which files ----------------------------------------------------------------------------


def test_folders_are_searched_in_sorted_order_skipping_tool_folders(tmp_path):
    bad = "import rearr\nrearr.rearrange(x, 'b c -> c')\n"
    for rel in ["z.py", "a.py", "sub/m.py", "sub/deeper/b.py", "A.py", "notes.txt", "script",
                ".hidden/h.py", "venv/v.py", ".venv/v.py", "build/b.py", "dist/d.py", "pkg.egg-info/e.py",
                "__pycache__/c.py", ".git/g.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(bad)
    proc = run("check", ".", "script", cwd=tmp_path)
    paths = [TEXT_LINE.match(line)["path"] for line in findings(proc)]
    assert paths == ["A.py", "a.py", "script", "sub/deeper/b.py", "sub/m.py", "z.py"]  # sorted, whatever the order
    # Named explicitly, a file in a skipped folder is checked; named twice, it is checked once.
    proc = run("check", "venv/v.py", "venv/v.py", cwd=tmp_path)
    assert [TEXT_LINE.match(line)["path"] for line in findings(proc)] == ["venv/v.py"]


def test_default_path_is_the_current_folder(tmp_path):
    (tmp_path / "m.py").write_text("from rearr import repeat\nrepeat(x, 'h -> h c')\n")
    proc = run("check", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.startswith("m.py:2:19: RA301 the new axis 'c' has no length")  # repeat(x, 'h -> h c')


# --- what is found in the source ------------------------------------------------------------


@pytest.mark.parametrize("header, call", [
    ("import rearr", "rearr.rearrange(x, 'b c -> c')"),
    ("import rearr as r", "r.rearrange(x, 'b c -> c')"),
    ("import rearr.api", "rearr.rearrange(x, 'b c -> c')"),  # `import a.b` binds a
    ("from rearr import rearrange", "rearrange(x, 'b c -> c')"),
    ("from rearr import rearrange as ra", "ra(x, 'b c -> c')"),
    ("from rearr import (\n    rearrange,\n)", "rearrange(x, 'b c -> c')"),
    ("from rearr import *", "rearrange(x, 'b c -> c')"),
    ("def f():\n    from rearr import rearrange\n    return 1", "rearrange(x, 'b c -> c')"),
    ("import rearr", "y = [rearr.rearrange(\n    x, 'b c -> c') for x in xs]"),
    ("import rearr", "@decorate(rearr.rearrange(x, 'b c -> c'))\ndef f(): pass"),
    ("import rearr", "class A:\n    def f(self):\n        if t:\n            return rearr.rearrange(x, 'b c -> c')"),
])
def test_import_forms(header, call):
    source = f"{header}\n{call}\n"
    line = source.splitlines().index(next(s for s in source.splitlines() if "'b c -> c'" in s)) + 1
    col = source.splitlines()[line - 1].index("'b c -> c'") + 2  # the 'b', just inside the quote
    assert check(source) == [(line, col, "RA200")]


@pytest.mark.parametrize("source", [
    "from rearr.api import rearrange\nrearrange(x, 'b c -> c')",  # a submodule: not one of the forms
    "import rearr.api as api\napi.rearrange(x, 'b c -> c')",
    "from . import rearrange\nrearrange(x, 'b c -> c')",  # relative: rearr's own code
    "from rearr import rearrange\nfrom mine import rearrange\nrearrange(x, 'b c -> c')",  # rebound
    "import rearr\nrearr = other\nrearr.explain('b c -> c')",  # explain is not checked
    "import rearr\nrearr.rearrange(x, f'b c -> {c}')",  # an f-string
    "import rearr\nrearr.rearrange(x, pattern)",
    "import rearr\nrearr.rearrange(*args)",
    "import rearr\nrearr.reduce(x, *rest)",
    "import rearr\nx.rearrange(x, 'b c -> c')",  # a method of something else
    "import rearrange\nrearrange.rearrange(x, 'b c -> c')",  # another package that starts alike
    "# rearr is named only here\nrearrange(x, 'b c -> c')",
    "import rearr\nrearr.rearrange(x, b'b c -> c')",  # bytes are not a pattern literal
])
def test_not_checked(source):
    assert check(source) == []


def test_positional_and_keyword_patterns_of_every_function():
    source = "\n".join([
        "import rearr",
        "rearr.rearrange(x, pattern='b c -> c')",
        "rearr.reduce(x, 'b c -> b c 2', 'sum')",
        "rearr.reduce(x, pattern='b c -> b', reduction='avg')",
        "rearr.repeat(x, 'h -> h c')",
        "rearr.scatter(s, 'b k -> b n[i]', 'sum', i=idx, n=1.5, fill=0, into=None, check_bounds=False)",
        "rearr.einsum(a, b, 'i j, j k -> i l')",
        "rearr.einsum(*xs, 'i j -> l')",
        "rearr.pack(xs, 'b c')",
        "rearr.unpack(p, shapes, 'b * * c')",
        "rearr.unpack(p, shapes, pattern='b c')",
        "rearr.parse_shape(x, 'b * c')",
        "rearr.einsum(a, 'i j -> i, j')",
    ])
    assert check(source) == at(
        source, (2, "RA200", "b c -> c'"), (3, "RA203", "2'"), (4, "RA400", "'avg'"), (5, "RA301", "c'"),
        (6, "RA305", "n[i]"), (7, "RA200", "l'"), (8, "RA200", "l'"), (9, "RA205", "')"), (10, "RA205", "* c'"),
        (11, "RA205", "')"), (12, "RA205", "* c'"), (13, "RA206", "->"),
    )


def test_reduction_that_is_not_a_literal_is_accepted():
    source = "\n".join([
        "from rearr import reduce, scatter",
        "reduce(x, 'b c -> b', fn)", "reduce(x, 'b c -> b', lambda t, axes: t)", "reduce(x, 'b c -> b', reduction=r)",
        "reduce(x, 'b c -> b', **options)", "scatter(s, 'b k -> b n[i]', how, i=idx, n=4)",
        "scatter(s, 'b k -> b n[i]', **options, i=idx, n=4)",
        "reduce(x, 'b c -> b')",  # no reduction at all: the call would fail
    ])
    assert check(source) == at(source, (8, "RA400", "'b c -> b'"))  # the pattern: there is no reduction


def test_reduce_with_rearrange_is_a_rearrange_as_in_einops():
    source = "\n".join([
        "import rearr, einops",
        "from rearr.layers import Reduce",
        "rearr.reduce(x, 'a b c -> c (b a)', 'rearrange')",
        "einops.reduce(x, 'a b c -> c (b a)', 'rearrange')",
        "Reduce('b h c -> c h b', 'rearrange')",
        "rearr.reduce(x, 'a b c -> a', 'rearrange')",  # nothing may be reduced then
    ])
    assert check(source, einops=True) == at(source, (6, "RA200", "b c -> a"))


def test_literal_lengths_are_checked_and_variables_are_not():
    source = "import rearr\n" + "\n".join(
        f"rearr.rearrange(x, 'b (c h) -> b c h', h={value})" for value in ["4", "n", "-2", "+3", "'4'", "4.0", "True"]
    )
    assert check(source) == at(source, *[(line, "RA305", "h)") for line in (4, 6, 7, 8)])


def test_index_keywords_are_not_lengths():
    source = "import rearr\nrearr.rearrange(x, 'b n[idx] -> b', idx=[0, 1])\nrearr.rearrange(x, 'b n -> b', idx=i)\n"
    assert check(source) == at(source, (3, "RA200", "n -> b"))


def test_kwargs_silence_only_the_missing_length_errors():
    """**lengths may hold a missing length (RA301), but no keyword in it makes h= name an axis (RA300)."""
    source = "\n".join([
        "from rearr import rearrange, repeat",
        "rearrange(x, 'b c -> c b', h=3)",
        "rearrange(x, 'b c -> c b', h=3, **lengths)",
        "repeat(x, 'b -> b n')",
        "repeat(x, 'b -> b n', **lengths)",
        "repeat(x, 'b -> b n n', **lengths)",
        "rearrange(x, 'b (c h) -> b c h', h=-1, **lengths)",
    ])
    assert check(source) == at(source, (2, "RA300", "'b c"), (3, "RA300", "'b c"), (4, "RA301", "n'"),
                               (6, "RA201", "n'"), (7, "RA305", "h)"))


def test_implicit_concatenation_is_one_pattern_reported_at_its_start():
    source = "import rearr\nrearr.rearrange(x, 'b c '\n                 '-> b c ?')\n"
    [p] = lint.check_source(source, "t.py")
    assert (p.line, p.col, p.end_line, p.end_col, p.code, p.pattern) == (2, 20, 3, 28, "RA103", "b c -> b c ?")


@pytest.mark.parametrize("before", ["", "é = 1; ", "s = '→→'; ", "# nothing\nt = 'ü'; ", "x = '\\u00e9'; ", "x = 1;\t"])
@pytest.mark.parametrize("literal", ["'b c -> b c ?'", '"b c -> b c ?"', "r'b c -> b c ?'", "'''b c -> b c ?'''",
                                     "U'b c -> b c ?'", "('b c -> b c ?')"])
def test_columns_count_characters_up_to_the_faulty_one(before, literal):
    source = f"from rearr import rearrange\n{before}rearrange(x, {literal})\n"
    line = source.splitlines()[-1]
    [p] = lint.check_source(source, "t.py")
    assert (p.line, p.col, p.end_col, p.code) == (len(source.splitlines()), line.index("?") + 1, line.index("?") + 2,
                                                  "RA103")


@pytest.mark.parametrize("literal", ["'b c -> b c \\x3f'", "'b c -> b\\tc ?'", "'b c ' '-> b c ?'",
                                     "'b c ' r'-> b c ?'"])
def test_literals_that_do_not_map_onto_the_source_are_reported_at_their_start(literal):
    source = f"from rearr import rearrange\né = '→'; rearrange(x, {literal})\n"
    line = source.splitlines()[1]
    [p] = lint.check_source(source, "t.py")
    start = line.index(literal) + 1
    assert (p.line, p.col, p.code) == (2, start, "RA103")


def test_einops_calls_need_the_flag():
    source = "import einops\nfrom einops import reduce as r\neinops.rearrange(x, 'b c -> c')\nr(x, 'b c -> b', 'avg')\n"
    assert check(source) == []
    assert check(source, einops=True) == at(source, (3, "RA200", "b c -> c"), (4, "RA400", "'avg'"))
    # einops has no scatter, and explain is nobody's
    assert check("import einops\neinops.scatter(x, 'b k -> b n[i]', 'avg')\n", einops=True) == []


def test_findings_are_sorted_and_carry_the_pattern():
    source = "import rearr\nb = rearr.repeat(x, 'a -> a c'); a = rearr.rearrange(x, 'a b -> a')\n"
    problems = lint.check_source(source, "t.py")
    assert [(p.line, p.col, p.code) for p in problems] == at(source, (2, "RA301", "c'"), (2, "RA200", "b -> a"))
    assert [p.pattern for p in problems] == ["a -> a c", "a b -> a"]


def random_pattern(rng: random.Random) -> str:
    """Mostly well-formed patterns (so that the checks after parsing run), now and then a stray token."""
    items = ["a", "b", "c", "(a b)", "(b 2)", "...", "*", "_", "1", "2", "()", "n[idx]", "n[idx: a]", "é", "a_"]

    def side() -> str:
        return ", ".join(" ".join(rng.choices(items, k=rng.randint(0, 3))) for _ in range(rng.choice([1, 1, 2])))

    text = side() + (f" -> {side()}" if rng.random() < 0.8 else "")
    if rng.random() < 0.2:
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(["(", ")", "[", "]", ":", "->", ",", ".", "-", "?"]) + text[at:]
    return text


def test_any_pattern_gives_findings_never_a_crash():
    # Seeded random patterns for every function: each call is valid or has one finding with a
    # documented code (this finds einsum's 'a -> b, c', which crashed the validator once).
    rng = random.Random(4)
    for _ in range(2000):
        pattern, op = random_pattern(rng), rng.choice(list(lint.SIGNATURES))
        args = {"einsum": "a, b, ", "unpack": "p, shapes, "}.get(op, "x, ")
        extra = {"reduce": ", 'sum'", "scatter": ", 'sum', a=2"}.get(op, ", idx=i")
        problems = lint.check_source(f"import rearr\nrearr.{op}({args}{pattern!r}{extra})\n")
        assert len(problems) <= 1 and all(p.code in CODES and p.line == 2 for p in problems), (op, pattern)


def test_validator_is_the_librarys_own():
    # The checker reports exactly what the library raises for the same call.
    from rearr.rules.recipe import validate

    err = validate("b c -> b d", "rearrange")
    assert isinstance(err, RearrError)
    [p] = lint.check_source("import rearr\nrearr.rearrange(x, 'b c -> b d')\n")
    assert (p.code, p.message, p.hint) == (err.code, err.message, err.hint)


# --- what is imported -----------------------------------------------------------------------


def test_check_does_not_import_torch_or_einops():
    code = ("import sys; from rearr.tools.cli import main; rc = main(['check', '--einops', 'tests/fixtures/check']); "
            "print(rc, sorted(m for m in ('torch', 'einops', 'numpy.random') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "1 []", proc.stderr


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(the rearr modules, the absolute modules) that rearr/<module>.py imports (module: a path below rearr/)."""
    tree = ast.parse((REPO / "rearr" / f"{module}.py").read_text(encoding="utf-8"))
    ours = {n.module or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level for a in n.names}
    absolute = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level}
    absolute |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return ours, absolute  # type: ignore[return-value]


def test_lint_imports_only_the_standard_library_and_the_recipe_stage():
    # rearr.rules.layer_recipe holds the layers' constructor rules so that lint need not import rearr.layers (torch)
    ours, absolute = _imports("tools/lint")
    assert ours == {"errors", "rules.recipe", "rules.layer_recipe", "rules.arguments", "flow"}
    flow_ours, flow_absolute = _imports("tools/flow")  # the shape flow, which lint runs
    # the library's own length solver decides what the flow finds
    assert flow_ours == {"errors", "planning.lengths", "rules.recipe", "docstrings", "jaxtyping"}
    assert flow_absolute <= {"__future__", "ast", "collections", "collections.abc", "dataclasses", "math", "re"}
    assert _imports("tools/docstrings") == ({"jaxtyping"}, {"__future__", "ast", "re"})
    typing_ours, typing_absolute = _imports("tools/jaxtyping")  # jaxtyping's annotations, read, never imported
    assert typing_ours == set() and typing_absolute <= {"__future__", "ast", "re", "collections.abc"}
    assert absolute <= {"__future__", "ast", "errno", "io", "os", "re", "stat", "sys", "tokenize", "warnings",
                        "bisect", "collections", "collections.abc", "dataclasses"}
    ours, absolute = _imports("rules/layer_recipe")
    assert ours <= {"syntax", "_record", "errors", "recipe", "arguments"}
    assert absolute <= {"__future__", "math", "numbers", "operator", "collections.abc", "typing"}


# --- the rest of the command line -----------------------------------------------------------


def test_version():
    from rearr._version import __version__ as version  # the one place it is written

    proc = run("--version")
    assert (proc.returncode, proc.stdout) == (0, f"rearr {version}\n")


def test_main_returns_the_exit_code_of_bad_usage(capsys):
    assert cli.main(["check", "--format", "yaml"]) == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0


@pytest.mark.parametrize("args, message", [
    (["--shape", "2,x"], "argument --shape: '2,x' is not a shape"),
    (["--shape", "2,,3"], "argument --shape: '2,,3' is not a shape"),
    (["--shape", "-2"], "argument --shape: '-2' is not a shape"),
    (["--shape", "2,5", "-l", "h"], "argument -l/--length: 'h' is not a length"),
    (["--shape", "2,5", "-l", "h=x"], "argument -l/--length: 'h=x' is not a length"),
    (["--shape", "2,5", "-l", "2=4"], "argument -l/--length: '2=4' is not a length"),
    (["--shape", "2,5", "--op", "pack"], "argument --op: invalid choice: 'pack'"),
    ([], "the following arguments are required: --shape"),
])
@pytest.mark.slow
def test_explain_argument_errors(args, message):
    proc = run("explain", "b c -> c b", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"rearr explain: error: {message}" in proc.stderr


def test_explain_passes_its_arguments_through(monkeypatch, capsys):
    calls = []

    def fake_explain(pattern, *shapes, **kwargs):
        calls.append((pattern, shapes, kwargs))
        return "EXPLAINED"

    monkeypatch.setattr(importlib.import_module("rearr.tools.explain"), "explain", fake_explain)
    argv = ["explain", "b n[idx] -> b", "--shape", "2, 5", "--op", "reduce", "--reduction", "max",
            "--backend", "numpy", "-l", "k=3", "--length", "idx=2,3", "--show"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == "EXPLAINED\n"
    assert calls == [("b n[idx] -> b", ((2, 5),),
                      {"op": "reduce", "reduction": "max", "show": True, "backend": "numpy", "k": 3, "idx": (2, 3)})]
    calls.clear()
    assert cli.main(["explain", "a -> a", "--shape", ""]) == 0  # a scalar's shape; the backend is explain's default
    assert calls == [("a -> a", ((),), {"op": "rearrange", "reduction": None, "show": False})]


def test_explain_prints_a_rearr_error_and_exits_1():
    proc = run("explain", "c b h -> b (c h) q", "--shape", "2,5,32")
    assert proc.returncode == 1 and proc.stdout == ""
    first, pattern_line, caret = proc.stderr.splitlines()[:3]
    assert first == "rearr explain: RA200: axis 'q' appears only on the output side of rearrange"
    assert caret.index("^") == pattern_line.index("q")


def test_explain_prints_the_explanation():
    proc = run("explain", "c b h -> b (c h)", "--shape", "2,5,32")
    assert proc.returncode == 0, proc.stderr
    assert "(2, 5, 32) -> (5, 64)" in proc.stdout


# --- the files that ship with the checker ---------------------------------------------------


def test_pre_commit_hooks():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    hooks = {}
    for block in text.split("- id: ")[1:]:
        hook_id, *rest = block.splitlines()
        hooks[hook_id] = dict(line.strip().split(": ", 1) for line in rest if ": " in line)
    assert {k: (v["entry"], v["language"], v["types"]) for k, v in hooks.items()} == {
        "rearr-check": ("rearr check --force-exclude", "python", "[python]"),
        "rearr-check-einops": ("rearr check --force-exclude --einops", "python", "[python]"),
    }
    # Python 3.10 reads the config with tomli: the hooks install it as the `check` extra does.
    assert all(v["additional_dependencies"] == '["tomli>=1.1; python_version < \'3.11\'"]' for v in hooks.values())


def test_docs_list_every_code_with_its_meaning():
    text = (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(RA\d{3})` \| (.+) \|$", text, flags=re.M))
    assert rows == CODES


# --- two unknown lengths in one input group ------------------------------


@pytest.mark.parametrize("shape", [(6, 2, 3), (0, 2, 3), (1, 1, 1), (6, 2), (7, 2, 3, 4)])
def test_two_unknowns_in_one_input_group_fail_before_the_shape_is_looked_at(shape):
    import numpy as np

    import rearr

    with pytest.raises(RearrError) as info:
        rearr.rearrange(np.zeros(shape), "(b m) n d -> b m n d")
    assert info.value.code == "RA301" and info.value.col == 0  # the group, whatever the shape
    assert info.value.message == "cannot infer both 'b' and 'm' from one input dimension"
    # The hint works when applied: one length is enough.
    assert rearr.rearrange(np.zeros((6, 2, 3)), "(b m) n d -> b m n d", b=2).shape == (2, 3, 2, 3)


@pytest.mark.parametrize("op, pattern, reduction, lengths, error", [
    ("rearrange", "(b m) n d -> b m n d", None, {}, "'b' and 'm'"),
    ("rearrange", "(a b c) -> a b c", None, {"a": 2}, "'b' and 'c'"),
    ("rearrange", "(a b c) -> a b c", None, {}, "'a', 'b' and 'c'"),
    ("rearrange", "... (h w) -> ... h w", None, {}, "'h' and 'w'"),
    ("rearrange", "(b m) n[idx] -> b m", None, {"idx": None}, "'b' and 'm'"),  # an index is no length
    ("reduce", "(b m) n -> n", "sum", {}, "'b' and 'm'"),
    ("repeat", "(b m) -> b m c", None, {"c": 2}, "'b' and 'm'"),
    ("scatter", "(b m) k -> b n[i]", "sum", {"n": 4}, "'b' and 'm'"),
    ("rearrange", "(b m) n d -> b m n d", None, {"b": UNKNOWN}, None),  # a variable is a length
    ("rearrange", "(b 2) -> b", None, {}, "RA203"),  # an integer is not allowed there in rearrange...
    ("reduce", "(b 2) n -> b n", "max", {}, None),  # ...but in reduce it is a known length
    ("rearrange", "(b 1 m) -> b m", None, {"m": 3}, None),  # a unit axis needs no length
])
def test_the_rule_is_in_validate(op, pattern, reduction, lengths, error):
    from rearr.rules.recipe import validate

    err = validate(pattern, op, reduction, lengths)
    if error is None:
        assert err is None
    elif error.startswith("RA"):
        assert err is not None and err.code == error
    else:
        assert err is not None and err.code == "RA301" and error in err.message, err


def test_a_literal_none_length_is_a_finding_a_variable_is_not():
    # None is a value (RA305 when the call runs), not "unknown": that is rearr.rules.recipe.UNKNOWN.
    source = ("from rearr import rearrange\n"
              "rearrange(x, 'a (b c) -> a b c', c=None)\nrearrange(x, 'a (b c) -> a b c', c=n)\n")
    assert [(line, code) for line, _, code in check(source)] == [(2, "RA305")]


def test_check_reports_two_unknowns_in_a_group_unless_lengths_may_come_from_kwargs():
    source = "\n".join([
        "from rearr import rearrange, reduce",
        "y = rearrange(x, '(b m) n d -> b m n d')",
        "y = rearrange(x, '(b m) n d -> b m n d', b=batch)",
        "y = rearrange(x, '(b m) n d -> b m n d', **lengths)",
        "y = reduce(x, 'b (h w) c -> b c', 'mean')",
        "y = reduce(x, 'b (h w) c -> b c', 'mean', h=4)",
    ])
    assert check(source) == at(source, (2, "RA301", "(b m"), (5, "RA301", "(h w"))


# --- layers -----------------------------------------------------------------


@pytest.mark.parametrize("header, call, needle", [
    ("from rearr.layers import Rearrange", "Rearrange('b c -> c')", "b c -> c'"),
    ("from rearr.layers import Rearrange as R", "R('b c -> c')", "b c -> c'"),
    ("from rearr.layers import *", "Rearrange('b c -> c')", "b c -> c'"),
    ("import rearr.layers", "rearr.layers.Rearrange('b c -> c')", "b c -> c'"),
    ("import rearr", "rearr.layers.Rearrange('b c -> c')", "b c -> c'"),
    ("import rearr.layers as L", "L.Rearrange('b c -> c')", "b c -> c'"),
    ("from rearr import layers", "layers.Rearrange('b c -> c')", "b c -> c'"),
    ("from rearr import layers as nnl", "nnl.Rearrange(pattern='b c -> c')", "b c -> c'"),
    ("from rearr.layers import Reduce", "Reduce('b c -> d', 'sum')", "d'"),
    ("from rearr.layers import Repeat", "Repeat('b c -> c', c=2)", "b c -> c'"),
    ("from rearr.layers import Gather", "Gather('b c -> c')", "b c -> c'"),
    ("from rearr.layers import Scatter", "Scatter('b c -> n[i] d', 'sum', fill=0)", "d'"),
    ("import torch.nn as nn\nfrom rearr.layers import Rearrange",
     "model = nn.Sequential(\n    nn.Linear(4, 4),\n    Rearrange('b c -> c'),\n)", "b c -> c'"),
])
def test_layer_forms(header, call, needle):
    source = f"{header}\n{call}\n"
    lines = source.splitlines()
    line = next(i for i, s in enumerate(lines, 1) if needle in s)
    assert check(source) == [(line, lines[line - 1].index(needle) + 1, "RA200")]


@pytest.mark.parametrize("header, call, needle", [
    ("from einops.layers.torch import Rearrange", "Rearrange('b c -> c')", "b c -> c'"),
    ("from einops.layers.torch import Rearrange as ERearrange", "ERearrange('b c -> c')", "b c -> c'"),
    ("import einops.layers.torch", "einops.layers.torch.Rearrange('b c -> c')", "b c -> c'"),
    ("import einops", "einops.layers.torch.Rearrange('b c -> c')", "b c -> c'"),
    ("from einops.layers import torch as T", "T.Rearrange('b c -> c')", "b c -> c'"),
    ("from einops import layers", "layers.keras.Rearrange('b c -> c')", "b c -> c'"),
    ("import einops.layers.tensorflow as tfl", "tfl.Reduce('b c -> c d', 'max')", "d'"),
    ("import einops.layers.paddle as pl", "pl.EinMix('b c -> c d', weight_shape='c', c=2)", "d'"),
    ("import einops.layers.flax as L", "L.Rearrange('b c -> c', sizes={})", "b c -> c'"),
    ("from einops.layers.oneflow import *", "Rearrange('b c -> c')", "b c -> c'"),
])
def test_einops_layer_forms_need_the_flag(header, call, needle):
    source = f"{header}\n{call}\n"
    assert check(source) == []
    assert check(source, einops=True) == [(2, call.index(needle) + 1, "RA200")]


@pytest.mark.parametrize("source", [
    "from einops.layers.torch import Repeat\nRepeat('b c -> c')",  # einops has no Repeat layer
    "from einops.layers.torch import Gather\nGather('b c -> c')",
    "from rearr.layers import Rearrange\nRearrange(pattern)",
    "from rearr.layers import Rearrange\nRearrange(*args)",
    "from rearr.layers import Rearrange\nlayer = Rearrange\nlayer.forward('b c -> c')",
    "import rearr.layers.extra as X\nX.Rearrange('b c -> c')",  # not a module that exports layers
    "from rearr.layers import Gather\nGather('b n[idx] -> b')",  # idx comes at forward time
    "from rearr.layers import Scatter\nScatter('b k -> b n[dst]', 'mean')",  # so do dst and into=
])
def test_layers_not_checked_or_valid(source):
    assert check(source, einops=True) == []


def test_flax_layers_take_their_lengths_in_one_dict():
    source = "\n".join([
        "import einops.layers.flax as L",
        "L.Rearrange('b (h w) -> b h w', sizes={'h': 4})",
        "L.Rearrange('b (h w) -> b h w', {'h': 4})",
        "L.Rearrange('b (h w) -> b h w', sizes=dict(h=4), name='split')",  # name=: flax's own
        "L.Rearrange('b (h w) -> b h w', sizes=config)",  # unknown lengths: no length finding
        "L.Rearrange('b (h w) -> b h w', sizes={**base, 'h': 4})",
        "L.Rearrange('b (h w) -> b h w')",
        "L.Rearrange('b (h w) -> b h w', sizes={'h': 4, 'q': 1})",
        "L.Reduce('b (h w) -> b', 'mean', {'h': -1})",
        "L.EinMix('b c -> b d', 'c d', 'd', {'c': 2})",
        "L.EinMix('b c -> b d', 'c d', None, {'c': 2, 'd': 3})",
    ])
    assert check(source, einops=True) == at(source, (7, "RA301", "(h w"), (8, "RA300", "'b (h"),
                                            (9, "RA305", "h w)"), (10, "RA301", "d', 'd'"))


# EinMix: each case is checked against einops' own EinMix (torch flavour): lint finds a problem
# exactly when einops refuses the layer.
EINMIX_CASES = [
    ("t b cin -> t b cout", "cin cout", "cout", {"cin": 10, "cout": 20}),
    ("h w c -> hout w c", "h hout", "hout", {"h": 32, "hout": 32}),
    ("t b c -> t b c", "c", None, {"c": 128}),
    ("t b (head cin) -> t b (head cout)", "head cin cout", None, {"head": 4, "cin": 8, "cout": 8}),
    ("b (h w) c -> b (h2 w2) c", "h w h2 w2", None, {"h": 3, "w": 3, "h2": 2, "w2": 2}),
    ("... c -> ... d", "c d", "d", {"c": 2, "d": 3}),
    ("b ... c -> b ... (c d)", "c d", None, {"c": 2, "d": 3}),
    ("b c -> b", "c", None, {"c": 3}),
    ("b c -> b d", "c d", None, {"c": 3}),  # d has no length
    ("b c -> b d", "c", None, {"c": 3}),  # d comes from nowhere
    ("b c -> b d", "c d e", None, {"c": 3, "d": 4, "e": 5}),  # e mixes nothing
    ("b c -> b d", "c d", None, {"c": 3, "d": 4, "q": 1}),  # q names nothing
    ("b c -> b d", "c d", "e", {"c": 3, "d": 4}),  # the bias axis is not an output
    ("b c -> b d", "c d", "b d", {"c": 3, "d": 4}),  # the bias axis has no length
    ("... d -> d ...", "d", "d", {"d": 3}),  # the bias axes must follow '...'
    ("b c -> b d", "(c d)", None, {"c": 3, "d": 4}),
    ("b c -> b d", "... c d", None, {"c": 3, "d": 4}),
    ("b c -> b d", "c 1 d", None, {"c": 3, "d": 4}),  # einops fails with a ValueError
    ("b c 2 -> b d", "c d", None, {"c": 3, "d": 4}),
    ("... c -> b d", "c d", None, {"c": 3, "d": 4}),
    ("(... c) -> ... d", "c d", None, {"c": 3, "d": 4}),
    ("b c c -> b d", "c d", None, {"c": 3, "d": 4}),
    ("b c -> b d", "c d d", None, {"c": 3, "d": 4}),
    ("b c -> b d d", "c d", None, {"c": 3, "d": 4}),
    ("b c", "c d", None, {"c": 3, "d": 4}),  # no '->': einops fails with a ValueError
    ("b c -> b d", "c d", None, {"c": 3, "d": -4}),
    ("b (h w) c -> b h w d", "c d", None, {"c": 3, "d": 4}),  # two unknowns in one input group
    ("b (h w) c -> b h w d", "c d", None, {"c": 3, "d": 4, "h": 2}),
]


@pytest.mark.parametrize("pattern, weight, bias, lengths", EINMIX_CASES)
def test_einmix_rules_agree_with_einops(pattern, weight, bias, lengths):
    pytest.importorskip("torch")
    from einops.layers.torch import EinMix

    try:
        EinMix(pattern, weight, bias, **lengths)
        refused = False
    except Exception:
        refused = True
    found = layer_recipe.validate_einmix(pattern, weight, bias, lengths)
    assert (found is not None) == refused, found
    if found is not None:
        where, err = found
        assert err.code in CODES and where in ("pattern", "weight_shape", "bias_shape")
        text = {"pattern": pattern, "weight_shape": weight, "bias_shape": bias}[where]
        assert err.col is None or 0 <= err.col < len(text) + 1


def test_einops_refuses_two_unknowns_in_a_group_before_any_shape_too():
    pytest.importorskip("torch")
    from einops.layers.torch import Rearrange

    with pytest.raises(Exception, match="Could not infer sizes"):
        Rearrange("(b m) n d -> b m n d")  # at construction: no tensor has been seen


def test_einmix_findings_point_into_the_right_literal():
    source = "\n".join([
        "from rearr.layers import EinMix",
        "EinMix('b c -> b d', 'c d', c=3)",
        "EinMix('b c -> b d', weight_shape='c d', bias_shape='e', c=3, d=4)",
        "EinMix('b c -> b e', 'c d', c=3, d=4)",
        "EinMix('b c -> b d', 'c d', c=3, d=4, q=2)",
        "EinMix('b c -> b d', w, c=3)",  # the weight is not a literal: its rules are skipped
        "EinMix('b c -> b e', w, c=3)",
        "EinMix('b c -> b d', 'c d', b, c=3, d=4)",
        "EinMix('b c -> b d', 'c d', c=3, **more)",  # lengths may come from **more
        "EinMix('b c -> b d', *shapes, c=3)",
        "EinMix('b (h w) -> b d', 'd', d=3)",
    ])
    assert check(source) == at(source, (2, "RA301", "d', c"), (3, "RA200", "e'"), (4, "RA200", "d', c"),
                               (5, "RA300", "'b c"), (11, "RA301", "(h w"))


def test_any_einmix_gives_a_finding_never_a_crash():
    rng = random.Random(8)
    for _ in range(1500):
        pattern, weight, bias = random_pattern(rng), random_pattern(rng), rng.choice([None, random_pattern(rng)])
        names = rng.sample(["a", "b", "c", "e"], rng.randint(0, 3))
        lengths = {name: rng.choice([2, UNKNOWN, -1, None]) for name in names}
        found = layer_recipe.validate_einmix(pattern, weight, bias, lengths)
        assert found is None or found[1].code in CODES, (pattern, weight, bias)


# --- files Python cannot parse -------------------------------------------

PYTHON = "Python {}.{}.{}".format(*sys.version_info[:3])


def newer_syntax() -> tuple[str, str]:
    """Source that the running Python cannot parse but a newer one can, and what it is."""
    if sys.version_info < (3, 12):
        return "type Vector = list[float]\nclass Box[T]:\n    pass\n", "a 'type' statement needs Python 3.12"
    if sys.version_info < (3, 14):
        return "try:\n    pass\nexcept ValueError, TypeError:\n    pass\n", "'except' without parentheses needs "
    pytest.skip("no syntax newer than this Python is known to the checker")


def test_newer_syntax_in_a_file_that_names_neither_library_is_no_failure(tmp_path):
    body, _ = newer_syntax()
    (tmp_path / "models.py").write_text(f"import torch  # a rearrangement, by hand\n{body}")
    (tmp_path / "plain.py").write_text(f"import torch\n{body}")
    (tmp_path / "ok.py").write_text("import rearr\nrearr.rearrange(x, 'b c -> c b')\n")
    proc = run("check", "-q", ".", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")  # not parsed: they cannot import them
    # A file that names einops may hold einops patterns: it is not skipped, unless einops is not checked.
    (tmp_path / "models.py").write_text(f"import einops\n{body}")
    assert run("check", "--no-einops", ".", cwd=tmp_path).returncode == 0
    assert run("check", ".", cwd=tmp_path).returncode == 2


def test_newer_syntax_in_a_file_that_names_rearr_is_RA003(tmp_path):
    body, what = newer_syntax()
    (tmp_path / "m.py").write_text(f"from rearr import rearrange\n{body}")
    proc = run("check", "--format", "json", ".", cwd=tmp_path)
    [p] = json.loads(proc.stdout)
    assert proc.returncode == 2 and (p["line"], p["code"]) == (2, "RA003")
    assert p["message"].startswith(what) and p["message"].endswith(f"; {PYTHON} cannot parse the file")
    assert p["hint"].startswith("run rearr check with Python 3.1")


def test_a_real_syntax_error_names_the_python_and_is_RA001_only_where_patterns_may_be(tmp_path):
    (tmp_path / "a.py").write_text("import rearr\nx = (1 +* 2)\n")
    (tmp_path / "b.py").write_text("import numpy  # rearranged\nx = (1 +* 2)\n")
    [p] = lint.check_file(str(tmp_path / "a.py"))
    assert (p.code, p.message) == ("RA001", f"{PYTHON} cannot parse the file: invalid syntax")
    assert lint.check_file(str(tmp_path / "b.py")) == []  # not parsed: it cannot import rearr


# --- hostile files and streams -------------------------------------------

posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs, devices and symlinks as on POSIX")


@posix_only
def test_a_fifo_in_a_folder_is_skipped_and_a_named_one_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")  # nobody writes to it: reading it would wait forever
    (tmp_path / "m.py").write_text("import rearr\nrearr.rearrange(x, 'b c -> c')\n")
    proc = run("check", ".", cwd=tmp_path)  # run() has a timeout: a hang fails the test
    assert proc.returncode == 1 and proc.stdout.startswith("m.py:2:")
    assert proc.stderr == "rearr check: note: pipe.py: skipped: not a regular file (a FIFO)\n"
    proc = run("check", "pipe.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.startswith("pipe.py:1:1: RA002 not a regular file (a FIFO): not read (fix: ")


@posix_only
def test_dev_zero_is_not_read():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    proc = run("check", "/dev/zero")
    assert proc.returncode == 2 and proc.stderr == ""
    assert proc.stdout.startswith("/dev/zero:1:1: RA002 not a regular file (a character device): not read")


def test_a_file_larger_than_the_cap_is_not_read(tmp_path):
    with open(tmp_path / "huge.py", "wb") as f:
        f.truncate(lint.MAX_BYTES + 1)  # sparse: costs no disk
    [p] = lint.check_file(str(tmp_path / "huge.py"))
    assert (p.code, p.message) == ("RA002", "the file is larger than 16 MiB: not read")


def test_deep_nesting_is_RA001_not_a_traceback(tmp_path):
    (tmp_path / "deep.py").write_text("import rearr\nx = " + "not " * 10_000 + "y\n")  # 40 KB
    (tmp_path / "parens.py").write_text("import rearr\nx = " + "(" * 5000 + "y" + ")" * 5000 + "\n")
    proc = run("check", "--format", "json", ".", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    got = {p["path"]: (p["code"], p["message"]) for p in json.loads(proc.stdout)}
    assert got["deep.py"][0] == got["parens.py"][0] == "RA001"
    assert got["deep.py"][1].startswith(f"{PYTHON} cannot parse the file: ")


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    (tmp_path / "many.py").write_text("import rearr\n" + "rearr.rearrange(x, 'b c -> c')\n" * 4000)  # > a pipe
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "rearr.tools.cli", "check", "many.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1  # the verdict stands: problems were found
    assert first.startswith(b"many.py:2:") and stderr == ""


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_an_ascii_stdout_gets_escapes_not_an_error(tmp_path, fmt):
    (tmp_path / "m.py").write_text("import rearr\nrearr.rearrange(x, 'b é -> b')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "rearr.tools.cli", "check", "--format", fmt, "m.py"], cwd=tmp_path,
                          env=env, capture_output=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr == b"", proc.stderr
    out = proc.stdout.decode("ascii")  # nothing but ASCII came out
    if fmt == "json":
        assert json.loads(out)[0]["message"] == "axis 'é' appears only on the input side of rearrange"
    else:
        assert "axis '\\xe9' appears only on the input side" in out


@posix_only
def test_a_symlink_loop_is_named_as_such(tmp_path):
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    proc = run("check", "-q", "loop.py", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "rearr check: loop.py: a symbolic link loop (too many levels of symbolic links)\n"
    proc = run("check", "-q", ".", cwd=tmp_path)  # found in a folder: an RA002 problem like any unreadable file
    assert proc.returncode == 2
    assert proc.stdout == ("loop.py:1:1: RA002 cannot read the file: a symbolic link loop "
                           "(too many levels of symbolic links)\n")


# rearr's EinMix also takes groups and unit axes in weight_shape and bias_shape.
REARR_EINMIX_CASES = EINMIX_CASES + [
    ("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", None, {"h": 4, "w": 4, "h2": 2, "w2": 2}),
    ("b c -> b (d e)", "c (d e)", "(d e)", {"c": 3, "d": 2, "e": 2}),
    ("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", None, {"h": 4, "w": 4, "h2": 2}),  # w2 has no length
    ("b (h w) c -> b c", "(h w) (h2 w2)", None, {"h": 4, "w": 4, "h2": 2, "w2": 2}),  # h2, w2 mix nothing
    ("b c -> b d", "(c d) ...", None, {"c": 3, "d": 4}),
    ("b c -> b d", "(c c) d", None, {"c": 3, "d": 4}),
    ("b c -> b d", "c (d 2)", None, {"c": 3, "d": 4}),
]


def test_groups_in_the_weight_are_rearrs_not_einops():
    rearr_mix = layer_recipe.validate_einmix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", None,
                                     {"h": 4, "w": 4, "h2": 2, "w2": 2}, groups=True)
    einops_mix = layer_recipe.validate_einmix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", None,
                                      {"h": 4, "w": 4, "h2": 2, "w2": 2})
    assert rearr_mix is None and einops_mix is not None and einops_mix[0] == "weight_shape"
    source = ("from rearr.layers import EinMix\nfrom einops.layers.torch import EinMix as E\n"
              "EinMix('b c -> b d', '(c d)', c=2, d=3)\nE('b c -> b d', '(c d)', c=2, d=3)\n")
    assert check(source, einops=True) == at(source, (4, "RA203", "(c d)'"))


# Each case against rearr.layers.EinMix: the layer and check call the same rules (rearr.rules.layer_recipe),
# so this checks how check reads the call's arguments. einops' refusals hold for rearr's EinMix too:
# a repeated axis (einops takes no diagonal) and two unknown lengths in one input group.
@pytest.mark.parametrize("pattern, weight, bias, lengths", REARR_EINMIX_CASES)
def test_einmix_rules_agree_with_rearr_layers(pattern, weight, bias, lengths):
    pytest.importorskip("torch")
    layers = pytest.importorskip("rearr.layers")  # another module: this runs where it exists

    try:
        layers.EinMix(pattern, weight, bias, **lengths)
        refused = False
    except RearrError:
        refused = True
    found = layer_recipe.validate_einmix(pattern, weight, bias, lengths, groups=True)
    assert (found is not None) == refused, found


def test_a_call_uses_the_nearest_import_above_it():
    # einops' own test_layers.py builds one model per framework in one file: torch's Reduce takes
    # lengths as keywords, flax's in sizes=. Each call is read with the import above it.
    source = "\n".join([
        "def torch_model():",
        "    from einops.layers.torch import Reduce",
        "    return Reduce('b (h h2) -> b h', 'max', h2=2)",
        "def flax_model():",
        "    from einops.layers.flax import Reduce",
        "    return Reduce('b (h h2) -> b h', 'max', sizes={'h2': 2})",
        "def flax_wrong():",
        "    return Reduce('b (h h2) -> b h', 'max', h2=2)",  # flax: h2= is not a length here
        "def uses_helper():",
        "    return rearrange(x, 'b c -> c')",  # the import is below: the first one counts",
        "from rearr import rearrange",
        "from mine import rearrange",
        "rearrange(x, 'b c -> c')",  # rebound: not rearr's
    ])
    assert check(source, einops=True) == at(source, (8, "RA301", "(h h2"), (10, "RA200", "b c -> c"))


# Constructor calls of rearr.layers: check finds exactly the error the constructor raises.
LAYER_CALLS = [
    'Rearrange("b c h w -> b (c h w)")',
    'Rearrange("a b -> a")',
    'Rearrange("(b m) n -> b m n")',
    'Rearrange("b n[i] -> b")',  # index brackets belong to Gather
    'Reduce("a b -> a", "median")',
    'Reduce("a (b c) -> a", "max", c=2)',
    'Reduce("b h c -> c h b", "rearrange")',
    'Reduce("b h c -> c b", "rearrange")',
    'Repeat("a -> a b")',
    'Repeat("a -> a b", b=2)',
    'Gather("a b -> b a")',  # no bracket
    'Gather("b n[idx] -> b")',
    'Gather("b n[idx] -> b", idx=3)',  # an index given to the constructor
    'Gather("v[ids: b t] d -> b t d")',
    'Scatter("b k -> b n[idx]", "sum", idx=3)',
    'Scatter("b k -> b n[idx]", "sum", fill="zero")',
    'Scatter("b k -> b n[idx]", "sum", None)',
    'Scatter("b k -> b n[idx]", "sum", -1.5)',
    'Scatter("b k -> b n[idx]", "sum", fill=True)',
    'Scatter("b k -> b n[idx]", "mean", n=4)',
    'Scatter("b k -> b n[idx]", "avg")',
    'EinMix("b c", "c d", c=2, d=3)',
    'EinMix("b c -> b d", "c d", c=2)',
    'EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", h=4, w=4, h2=2, w2=2)',
    'EinMix("b (h w) c -> b (h2 w2) c", "(h w) (h2 w2)", "h2 w2", h=4, w=4, h2=2, w2=2)',
    'EinMix("b c -> b d", "c d", "e", c=2, d=3)',
    'EinMix("... c -> b d", "c d", c=2, d=3)',
    'EinMix("b c c -> b d", "c d", c=2, d=3)',  # no diagonal, as einops
    'EinMix("b c -> b d", "(c c) d", c=2, d=3)',
    'EinMix("b (h w) c -> b h w d", "c d", c=2, d=3)',  # h and w unknown
    'EinMix("b (h w) c -> b h w d", "c d", c=2, d=3, h=2)',
    'Rearrange("a (b c) -> a b c", b=None)',
]


@pytest.mark.parametrize("call", LAYER_CALLS)
def test_check_finds_what_the_layer_constructor_raises(call):
    pytest.importorskip("torch")
    layers = pytest.importorskip("rearr.layers")
    try:
        eval(call, dict(vars(layers)))
        raised = []
    except RearrError as e:
        raised = [e.code]
    assert [p.code for p in lint.check_source(f"from rearr.layers import *\n{call}\n")] == raised


# --- lengths beyond int64 ----------------------------------------------------------------------


@pytest.mark.parametrize("literal, shown", [("1180591620717411303424", "2**70"), ("10" + "0" * 29, "10**30"),
                                            ("1180591620717411303425", "1.181e+21"), ("9223372036854775808", "2**63")])
def test_a_length_beyond_int64_is_named_short_and_says_why(literal, shown):
    import numpy as np

    import rearr

    (p,) = lint.check_source(f"import rearr\nrearr.rearrange(x, '(h w) -> h w', h={literal})\n")
    assert (p.code, p.message) == ("RA305", f"length h={shown} is larger than int64 counts (2**63 - 1)")
    assert literal not in p.text and p.hint == "pass a length below 2**63, e.g. h=4"
    with pytest.raises(RearrError) as info:  # the library says the same
        rearr.rearrange(np.zeros(4), "(h w) -> h w", h=int(literal))
    assert (info.value.code, info.value.message, info.value.hint) == (p.code, p.message, p.hint)


def test_a_gitignore_line_that_is_no_valid_regex_is_read_as_git_reads_it(tmp_path):
    git_repository(tmp_path)
    (tmp_path / ".gitignore").write_text("[z-a]\n[^]\n[[:alpha:]]_gen.py\n\\\n")
    for name in ("a.py", "z", "x_gen.py"):
        (tmp_path / name).write_text("import rearr\nrearr.rearrange(x, 'b c -> c')\n")
    proc = run("check", "-q", ".", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (1, "")
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["a.py"]  # z.py is no *.py: not walked


def test_every_code_is_a_rule_whose_description_the_docs_show():
    from rearr.tools.codes import RULES, help_uri

    assert list(RULES) == list(CODES)
    text = (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    for code, rule in RULES.items():
        assert f"\n### {code}\n\n{rule.description} (`{rule.name}`)\n" in text, code
        assert help_uri(code).endswith(f"/docs/check.md#{code.lower()}")
    assert len({rule.name for rule in RULES.values()}) == len(RULES)


def test_a_file_that_names_neither_library_is_not_parsed(monkeypatch):
    parsed = []
    monkeypatch.setattr(lint.ast, "parse", lambda *a, **k: parsed.append(a) or ast.Module([], []))
    assert lint.check_source("import torch\nx = torch.zeros(3)\n") == []
    assert lint.check_source("import einops\n", einops=False) == [] and parsed == []
    lint.check_source("import einops\n")
    assert len(parsed) == 1
