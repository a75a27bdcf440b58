"""`rearr check`'s options: noqa, --select/--ignore, --exclude/--extend-exclude, .gitignore,
[tool.rearr.check], the summary, --quiet, --statistics, sarif and the progress line.
The examples of docs/check.md's "Options" section run here as written."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from _cli import REPO, git_repository, run

from rearr.errors import CODES
from rearr.tools import cli, config, ignore, lint, report

BAD = "import rearr\nrearr.rearrange(x, 'b c -> c')\n"  # RA200 at 2:21


def codes(source: str) -> list[str]:
    return [p.code for p in lint.check_source(source)]


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def paths(proc: subprocess.CompletedProcess) -> list[str]:
    return [line.split(":")[0] for line in proc.stdout.splitlines() if re.match(r"^\S+:\d+:\d+: RA", line)]


# --- docs/check.md runs as written ------------------------------------------------------------


def doc_steps() -> list[tuple[str, str, str]]:
    """('file', name, text) and ('run', command, expected stdout) of the Options section, in order."""
    text = (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    section = text[text.index("## Options\n"): text.index("## Exit codes\n")]
    steps = []
    for m in re.finditer(r"(?:<!-- file: (?P<name>\S+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", section, re.S):
        if m["name"]:
            steps.append(("file", m["name"], m["body"]))
        elif m["lang"] == "console":
            for chunk in re.split(r"^\$ ", m["body"], flags=re.M)[1:]:
                command, _, out = chunk.partition("\n")
                steps.append(("run", command, out))
    return steps


@pytest.mark.slow
def test_the_docs_options_examples_run_as_written(tmp_path):
    """Each `$ rearr check ...` line (split as a shell would; `< FILE` feeds FILE to stdin) prints what is under it."""
    steps = doc_steps()
    assert sum(kind == "run" for kind, _, _ in steps) >= 20
    for kind, what, text in steps:
        if kind == "file":
            write(tmp_path, {what: text})
            continue
        argv = shlex.split(what)
        stdin = None
        if len(argv) > 2 and argv[-2] == "<":
            stdin, argv = (tmp_path / argv[-1]).read_bytes(), argv[:-2]
        assert argv[:2] == ["rearr", "check"], what
        proc = run(*argv[1:], cwd=tmp_path, stdin=stdin)
        assert proc.stdout == text, what
        assert proc.returncode in (0, 1), (what, proc.stderr)


def test_the_docs_name_every_option():
    text = (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    check = next(a for a in cli._parser()._actions if a.dest == "command").choices["check"]
    for action in check._actions:
        for flag in action.option_strings:
            if flag not in ("-h", "--help"):
                assert f"`{flag}" in text, flag


def test_every_option_has_an_example_that_runs():
    """Each option (or one of its spellings) is used by a `$ rearr check` line that the test above runs."""
    commands = [shlex.split(what) for kind, what, _ in doc_steps() if kind == "run"]
    check = next(a for a in cli._parser()._actions if a.dest == "command").choices["check"]
    for action in check._actions:
        flags = [f for f in action.option_strings if f not in ("-h", "--help")]
        if flags:
            assert any(f in argv or any(a.startswith(f + "=") for a in argv) for argv in commands for f in flags), flags


# --- noqa ----------------------------------------------------------------------------------


@pytest.mark.parametrize("comment, silenced", [
    ("# noqa", True),
    ("# NOQA", True),
    ("# noqa: RA200", True),
    ("# noqa:RA200", True),
    ("# noqa: RA301, RA200", True),
    ("# noqa: RA301 RA200", True),
    ("# type: ignore  # noqa: RA200", True),
    ("# noqa: RA301", False),  # another code
    ("# noqa: RA20", False),  # codes are whole, as ruff's
    ("# no qa", False),
])
def test_noqa_on_the_reported_line(comment, silenced):
    assert codes(f"import rearr\nrearr.rearrange(x, 'b c -> c')  {comment}\n") == ([] if silenced else ["RA200"])


def test_noqa_on_the_first_or_last_line_of_a_call_over_several_lines():
    call = "rearr.rearrange(\n    x,\n    'b c -> c',{}\n){}\n"
    assert codes("import rearr\n" + call.format("", "")) == ["RA200"]
    assert codes("import rearr\n" + call.format("  # noqa: RA200", "")) == []  # the reported line
    assert codes("import rearr\n" + call.format("", "  # noqa: RA200")) == []  # the last line
    first = "import rearr\nrearr.rearrange(  # noqa\n    x,\n    'b c -> c',\n)\n"
    assert codes(first) == []
    # A line inside the call that is neither does not count.
    assert codes("import rearr\nrearr.rearrange(\n    x,  # noqa\n    'b c -> c',\n)\n") == ["RA200"]


def test_a_hash_inside_a_string_is_not_a_comment():
    assert codes("import rearr\nrearr.rearrange(x, 'b c -> c'); s = '# noqa'\n") == ["RA200"]
    assert codes('import rearr\nrearr.rearrange(x, "b c -> c", c="# noqa")\n')  # a finding, whatever it is


def test_a_noqa_that_matches_nothing_is_not_an_error():
    assert codes("import rearr  # noqa: RA200\nrearr.rearrange(x, 'b c -> c b')  # noqa: RA999\n") == []


def test_noqa_and_selection_together(tmp_path):
    write(tmp_path, {"m.py": "import rearr\nrearr.rearrange(x, 'b c -> c')  # noqa: RA301\n"
                             "rearr.reduce(x, 'b c -> b', 'avg')  # noqa: RA400\n"})
    proc = run("check", "-q", ".", cwd=tmp_path)
    assert [line.split()[1] for line in proc.stdout.splitlines()] == ["RA200"]
    assert run("check", "-q", "--ignore", "RA200", ".", cwd=tmp_path).returncode == 0


# --- --select and --ignore -----------------------------------------------------------------


@pytest.mark.parametrize("select, ignore_, reported", [
    (["RA"], [], True),
    (["RA2"], [], True),
    (["RA3"], [], False),
    (["RA"], ["RA200"], False),
    (["RA2"], ["RA2"], False),  # a tie: ignore wins
    (["RA200"], ["RA2"], True),  # the longer selector wins
    (["RA2"], ["RA200"], False),
])
def test_selection(select, ignore_, reported):
    layer = config.Layer("test", "/", select=(*select, "RA400"), ignore=tuple(ignore_))
    assert config.resolve([layer]).enabled("RA200") is reported


def test_select_and_ignore_on_the_command_line(tmp_path):
    write(tmp_path, {"m.py": BAD + "rearr.reduce(x, 'b c -> b', 'avg')\n"})
    assert [line.split()[1] for line in run("check", "-q", "--select", "RA4", ".", cwd=tmp_path).stdout.splitlines()] \
        == ["RA400"]
    proc = run("check", "-q", "--select", "RA2,RA4", "--ignore", "RA400", ".", cwd=tmp_path)
    assert [line.split()[1] for line in proc.stdout.splitlines()] == ["RA200"]
    proc = run("check", "-q", "--ignore", "ra2", "--ignore", "RA400", ".", cwd=tmp_path)  # repeatable, any case
    assert (proc.returncode, proc.stdout) == (0, "")


def test_an_unknown_code_is_bad_usage(tmp_path):
    write(tmp_path, {"m.py": BAD})
    proc = run("check", "--select", "E501", ".", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown code or prefix 'E501'" in proc.stderr and proc.stdout == ""


def test_a_file_that_cannot_be_checked_is_reported_whatever_is_selected(tmp_path):
    write(tmp_path, {"m.py": "import rearr\ndef f(:\n", "ok.py": BAD})
    (tmp_path / "latin1.py").write_bytes(b"import rearr\n# caf\xe9\n")
    for args in [[], ["--select", "RA2"], ["--select", "RA4"], ["--per-file-ignores", "*.py:RA"]]:
        proc = run("check", "-q", *args, ".", cwd=tmp_path)
        assert proc.returncode == 2, args
        assert [line.split()[:2] for line in proc.stdout.splitlines() if " RA00" in line] == [
            ["latin1.py:2:6:", "RA002"], ["m.py:2:7:", "RA001"]], args
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nselect = ["RA4"]\n'})
    assert run("check", ".", cwd=tmp_path).returncode == 2


@pytest.mark.parametrize("args", [["--ignore", "RA001"], ["--extend-ignore", "ra002,RA2"], ["--ignore", "RA00"],
                                  ["--per-file-ignores", "*.py:RA003"]])
def test_ignoring_the_codes_of_files_that_cannot_be_checked_is_refused(tmp_path, args):
    write(tmp_path, {"m.py": BAD})
    proc = run("check", *args, ".", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "cannot be ignored: RA001, RA002, RA003 say that a file could not be checked" in proc.stderr


# --- --exclude, --extend-exclude and the globs ---------------------------------------------


@pytest.mark.parametrize("glob, path, is_dir, left_out", [
    ("build", "a/build", True, True),
    ("build", "a/build", False, True),
    ("build/", "a/build", False, False),  # folders only
    ("*_pb2.py", "x/y_pb2.py", False, True),
    ("src/*.py", "src/a.py", False, True),
    ("src/*.py", "lib/src/a.py", False, False),  # anchored at the base
    ("/a.py", "a.py", False, True),
    ("/a.py", "sub/a.py", False, False),
    ("src/**/gen.py", "src/x/y/gen.py", False, True),
    ("src/**/gen.py", "src/gen.py", False, True),
    ("**/tmp", "a/b/tmp", True, True),
    ("doc?.py", "docs.py", False, True),
    ("[ab].py", "b.py", False, True),
    ("[!ab].py", "b.py", False, False),
    ("# a comment", "# a comment", False, False),
    (r"\#x.py", "#x.py", False, True),
])
def test_globs(tmp_path, glob, path, is_dir, left_out):
    globs = ignore.Globs.parse(str(tmp_path), [glob])
    assert ignore.left_out([globs], str(tmp_path / path), is_dir) is left_out


def test_negation_re_includes_and_the_last_match_wins(tmp_path):
    globs = ignore.Globs.parse(str(tmp_path), ["*.py", "!keep.py"])
    assert ignore.left_out([globs], str(tmp_path / "x.py"), False)
    assert not ignore.left_out([globs], str(tmp_path / "keep.py"), False)


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(tmp_path):
    write(tmp_path, {"a.py": BAD, "gen/g.py": BAD, "build/b.py": BAD, "x_pb2.py": BAD})
    assert paths(run("check", ".", cwd=tmp_path)) == ["a.py", "gen/g.py", "x_pb2.py"]
    assert paths(run("check", "--extend-exclude", "gen,*_pb2.py", ".", cwd=tmp_path)) == ["a.py"]
    assert paths(run("check", "--exclude", "gen/", ".", cwd=tmp_path)) == ["a.py", "build/b.py", "x_pb2.py"]
    # Named on the command line, an excluded file is checked.
    assert paths(run("check", "--extend-exclude", "gen", "gen/g.py", cwd=tmp_path)) == ["gen/g.py"]


# --- .gitignore ------------------------------------------------------------------------------


def gitignored_tree(root: Path) -> None:
    write(root, {"a.py": BAD, "gen/g.py": BAD, "sub/s.py": BAD, "sub/local.py": BAD, "sub/keep_me.py": BAD,
                 ".gitignore": "gen/\n*_me.py\n", "sub/.gitignore": "local.py\n!keep_me.py\n"})


def test_gitignore_in_a_work_tree(tmp_path):
    gitignored_tree(tmp_path)
    git_repository(tmp_path)
    assert paths(run("check", ".", cwd=tmp_path)) == ["a.py", "sub/keep_me.py", "sub/s.py"]
    # A subfolder checked alone still has the root's .gitignore above it.
    assert paths(run("check", "sub", cwd=tmp_path / ".")) == ["sub/keep_me.py", "sub/s.py"]
    # Named, an ignored file or folder is checked.
    assert paths(run("check", "gen", "sub/local.py", cwd=tmp_path)) == ["gen/g.py", "sub/local.py"]


def test_gitignore_with_a_real_git_repository(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    gitignored_tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    ours = paths(run("check", ".", cwd=tmp_path))
    # What git itself leaves out of the *.py files.
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "--", "*.py"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout.split()
    assert ours == sorted(listed) == ["a.py", "sub/keep_me.py", "sub/s.py"]


def test_outside_a_work_tree_gitignore_is_not_read(tmp_path):
    gitignored_tree(tmp_path)
    assert ignore.work_tree(str(tmp_path)) is None or ignore.work_tree(str(tmp_path)) != str(tmp_path)
    if ignore.work_tree(str(tmp_path)) is not None:
        pytest.skip("the temporary folder is inside a git work tree")
    assert paths(run("check", ".", cwd=tmp_path)) == ["a.py", "gen/g.py", "sub/keep_me.py", "sub/local.py",
                                                      "sub/s.py"]


# --- [tool.rearr.check]: rearr/tools/config.py has its own tests (test_check_config.py) ----------


# --- summary, --quiet, --statistics, no files ------------------------------------------------


def test_summary_lines(tmp_path):
    write(tmp_path, {"a.py": BAD, "b.py": BAD + "rearr.reduce(x, 'b c -> b', 'avg')\n", "c.py": "x = 1\n"})
    assert run("check", ".", cwd=tmp_path).stdout.splitlines()[-1] == \
        "Found 3 problems in 2 files (3 files, 3 rearr patterns checked)."
    assert run("check", "a.py", cwd=tmp_path).stdout.splitlines()[-1] == \
        "Found 1 problem in 1 file (1 file, 1 rearr pattern checked)."
    assert run("check", "c.py", cwd=tmp_path).stdout == \
        "No pattern found in 1 file: none of them imports rearr or einops.\n"
    proc = run("check", "c.py", "missing.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == "No pattern found in 1 file: none of them imports rearr or einops. 1 path could not be " \
                          "read.\n"
    assert report.summary([], 1245, lint.Tally(rearr=12, einops=1776)) == \
        "All checks passed (1,245 files, 1,776 einops and 12 rearr patterns checked)."


@pytest.mark.parametrize("fmt", ["json", "github", "sarif"])
def test_machine_formats_have_no_summary(tmp_path, fmt):
    write(tmp_path, {"a.py": "import rearr\n"})
    out = run("check", "--format", fmt, ".", cwd=tmp_path).stdout
    assert "checks passed" not in out
    if fmt != "github":
        json.loads(out)


def test_statistics(tmp_path):
    write(tmp_path, {"a.py": BAD * 2 + "rearr.reduce(x, 'b c -> b', 'avg')\n"})
    proc = run("check", "--statistics", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [f"2  RA200  {CODES['RA200']}", f"1  RA400  {CODES['RA400']}",
                                        "Found 3 problems in 1 file (1 file, 3 rearr patterns checked)."]
    proc = run("check", "--statistics", "--format", "json", ".", cwd=tmp_path)
    assert json.loads(proc.stdout) == [{"code": "RA200", "count": 2, "meaning": CODES["RA200"]},
                                       {"code": "RA400", "count": 1, "meaning": CODES["RA400"]}]
    assert run("check", "--statistics", "--format", "sarif", ".", cwd=tmp_path).returncode == 2


def test_quiet_prints_the_findings_only(tmp_path):
    write(tmp_path, {"a.py": BAD})
    assert run("check", "--quiet", ".", cwd=tmp_path).stdout == \
        "a.py:2:21: RA200 axis 'b' appears only on the input side of rearrange " \
        "(fix: use rearr.reduce to aggregate it, or add it to the output)\n"


@pytest.mark.parametrize("files", [{}, {"notes.txt": "x"}, {"gen/a.py": BAD}])
def test_no_python_file_at_all_is_a_warning_and_exit_2(tmp_path, files):
    write(tmp_path, files)
    proc = run("check", "--extend-exclude", "gen", ".", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "rearr check: warning: no Python file found in .\n"


# --- sarif -----------------------------------------------------------------------------------


def sarif_result(proc: subprocess.CompletedProcess) -> tuple[dict, dict]:
    log = json.loads(proc.stdout)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    (run_,) = log["runs"]
    (result,) = run_["results"]
    return run_, result


def test_sarif(tmp_path):
    write(tmp_path, {"my model.py": BAD})
    proc = run("check", "--output-format", "sarif", ".", cwd=tmp_path)
    assert proc.returncode == 1
    run_, result = sarif_result(proc)
    driver = run_["tool"]["driver"]
    assert driver["name"] == "rearr" and driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == list(CODES)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] == CODES[rule["id"]]
        assert len(rule["fullDescription"]["text"]) > len(rule["shortDescription"]["text"])
        assert rule["helpUri"].endswith(f"docs/check.md#{rule['id'].lower()}")
    assert result["ruleId"] == "RA200" and driver["rules"][result["ruleIndex"]]["id"] == "RA200"
    assert result["level"] == "error" and result["message"]["text"].startswith("axis 'b' appears only")
    (location,) = result["locations"]
    assert location["physicalLocation"]["region"] == {"startLine": 2, "startColumn": 21, "endLine": 2,
                                                      "endColumn": 22}
    # Outside a git work tree, the URI is absolute.
    assert location["physicalLocation"]["artifactLocation"] == {"uri": (tmp_path / "my model.py").as_uri()}


@pytest.mark.slow
def test_sarif_uris_are_relative_to_the_work_tree_whatever_the_current_folder(tmp_path):
    write(tmp_path, {"src/pkg/my model.py": BAD})
    git_repository(tmp_path)
    for cwd, path in [(tmp_path, "src"), (tmp_path / "src", "."), (tmp_path / "src" / "pkg", "my model.py")]:
        run_, result = sarif_result(run("check", "--output-format", "sarif", path, cwd=cwd))
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"] == {"uri": "src/pkg/my%20model.py",
                                                                    "uriBaseId": "%SRCROOT%"}, cwd
        assert run_["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.as_uri() + "/"}}
        (issue,) = json.loads(run("check", "--output-format", "gitlab", path, cwd=cwd).stdout)
        assert issue["location"]["path"] == "src/pkg/my model.py", cwd  # GitLab's paths too
    fingerprints = {json.loads(run("check", "--output-format", "gitlab", path, cwd=cwd).stdout)[0]["fingerprint"]
                    for cwd, path in [(tmp_path, "src"), (tmp_path / "src" / "pkg", "."), (Path("/"), str(tmp_path))]}
    assert len(fingerprints) == 1  # the same finding, wherever the run starts


# --- progress ----------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty, quiet, shown", [(True, False, True), (True, True, False), (False, False, False)])
def test_progress_on_a_terminal_only(tmp_path, monkeypatch, capsys, tty, quiet, shown):
    write(tmp_path, {f"m{i}.py": "import rearr\n" for i in range(3)})
    monkeypatch.chdir(tmp_path)
    err = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr(cli.sys, "stderr", err)
    clock = iter(range(0, 100))
    monkeypatch.setattr(cli.time, "monotonic", lambda: float(next(clock)))
    assert cli.main(["check", *(["-q"] if quiet else []), "."]) == 0
    assert ("rearr check: 3/3 files" in err.getvalue()) is shown
    assert err.getvalue().endswith("\r\033[K") is shown  # erased at the end
