"""`rearr check`'s settings (rearr/tools/config.py) and which files it reads (rearr/tools/files.py): config
files parsed as TOML, found per file inside its work tree only, layered under the command line as ruff
layers them; malformed input is exit 2 with one line; symbolic links out of the tree are not followed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _cli import git_repository, one_line_error, run, write

from rearr.tools import config, files

BAD = "import rearr\nrearr.rearrange(x, 'b c -> c')\n"  # RA200 at 2:21
AVG = "import rearr\nrearr.reduce(x, 'b c -> b', 'avg')\n"  # RA400 at 2:29


def found(proc) -> list[tuple[str, str]]:
    """(path, code) of each finding in the text output."""
    return [(line.split(":")[0], line.split()[1]) for line in proc.stdout.splitlines() if ": RA" in line]


# --- TOML, parsed ---------------------------------------------------------------------------


@pytest.mark.parametrize("pyproject", [
    '[tool.rearr.check]\nignore = ["RA200"]\n',
    '[tool.rearr]\ncheck = { ignore = ["RA200"] }\n',
    '[tool."rearr".check]\nignore = ["RA200"]\n',
    "[tool.'rearr'.\"check\"]\nignore = ['RA200']\n",
    'tool.rearr.check.ignore = ["RA200"]\n',
    '[tool]\nrearr.check.ignore = ["RA200"]\n',
    '[tool.rearr.check]\nignore = ["ra200"]\n',  # codes in any case, as on the command line
    '[tool."\\u0072earr".check]\nignore = ["RA200"]\n',  # a TOML escape spells the same key
    '[tool.rearr.check]\nignore = [\n  "RA200",  # a comment\n]\n',
])
@pytest.mark.slow
def test_every_toml_spelling_of_the_table_is_read(tmp_path, pyproject):
    write(tmp_path, {"pyproject.toml": pyproject, "a.py": BAD + AVG.split("\n", 1)[1]})
    proc = run("check", "-q", ".", cwd=tmp_path)
    assert found(proc) == [("a.py", "RA400")], proc.stderr


@pytest.mark.parametrize("pyproject, needles", [
    ('[tool.rearr.check\nignore = ["RA200"]\n', ["pyproject.toml: invalid TOML"]),  # the header is not closed
    ('[tool.rearr.check]\nignore = ["RA200"\n', ["pyproject.toml: invalid TOML"]),
    ('[tool.rearr.check]\nselct = ["RA2"]\n', ["unknown key 'selct'", "extend-select"]),
    ('[tool.rearr.check]\nselect = "RA2"\n', ["select must be a list of strings"]),
    ('[tool.rearr.check]\nignore = ["X1"]\n', ["unknown code or prefix 'X1'"]),
    ('[tool.rearr.check]\nselect = []\n', ["no code is selected"]),
    ('[tool.rearr.check]\nignore = ["RA001"]\n', ["RA001 cannot be ignored"]),
    ('[tool.rearr.check]\nextend-exclude = ["gen/[z-a]"]\n', ["the glob 'gen/[z-a]' is malformed", "backwards"]),
    ('[tool.rearr.check]\nexclude = ["[^]"]\n', ["the glob '[^]' is malformed"]),
    ('[tool.rearr.check]\nextend-exclude = ["gen/", " "]\n', ["the glob ' ' is malformed", "names nothing"]),
    ('[tool.rearr.check]\nper-file-ignores = { "# x" = ["RA2"] }\n', ["the glob '# x' is malformed"]),
    ('[tool.rearr.check]\nforce-exclude = "yes"\n', ["force-exclude must be true or false"]),
    ('[tool.rearr.check]\nper-file-ignores = ["tests"]\n', ["per-file-ignores must be a table"]),
    ('[tool.rearr.check]\nper-file-ignores = { "tests/**" = ["RA9"] }\n', ["unknown code or prefix 'RA9'"]),
    ('[tool]\nrearr = 3\n', ["tool.rearr must be a table"]),
    ('[tool.rearr]\ncheck = ["RA2"]\n', ["tool.rearr.check must be a table"]),
    (b'[tool.rearr.check]\n# caf\xe9\n', ["pyproject.toml: not UTF-8"]),
    ('[tool.rearr.check]\nignore = ["\\u001b[31mRA9"]\n', ["unknown code or prefix '\\x1b[31mRA9'"]),
])
@pytest.mark.slow
def test_a_config_that_cannot_be_used_is_exit_2_with_one_line(tmp_path, pyproject, needles):
    write(tmp_path, {"pyproject.toml": pyproject, "a.py": BAD})
    proc = run("check", ".", cwd=tmp_path)
    one_line_error(proc, *needles)
    assert "\x1b" not in proc.stderr


def test_a_table_named_inside_a_string_is_no_table(tmp_path):
    write(tmp_path, {"pyproject.toml": '[project]\ndescription = """\n[tool.rearr.check]\nselect = []\n"""\n',
                     "a.py": BAD})
    proc = run("check", "-q", ".", cwd=tmp_path)
    assert proc.returncode == 1 and found(proc) == [("a.py", "RA200")] and proc.stderr == ""


def test_a_broken_pyproject_of_another_tool_does_not_stop_the_check(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.black\nline-length = 88\n", "a.py": BAD})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == [("a.py", "RA200")]


def test_python_3_10_reads_toml_with_tomli_or_says_how_to_install_it(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA200"]\n'})
    monkeypatch.setattr(config.sys, "version_info", (3, 10, 14))
    monkeypatch.setitem(sys.modules, "tomli", None)  # not installed
    with pytest.raises(config.ConfigError, match=r"pip install 'rearr\[check\]'"):
        config.read(str(tmp_path / "pyproject.toml"))
    import tomllib  # tomli's API is tomllib's

    monkeypatch.setitem(sys.modules, "tomli", tomllib)
    assert config.read(str(tmp_path / "pyproject.toml")).ignore == ("RA200",)


def test_the_check_extra_brings_tomli_on_python_3_10():
    import tomllib

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    extras = tomllib.loads(text)["project"]["optional-dependencies"]
    assert any(d.replace(" ", "").startswith("tomli") and "python_version<'3.11'" in d.replace(" ", "").replace(
        '"', "'") for d in extras["check"])
    assert set(extras["check"]) <= set(extras["test"])


# --- where config is looked for ---------------------------------------------------------------


def test_config_above_the_work_tree_is_never_read(tmp_path):
    # A shared parent folder's config must not change a project's checks.
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA2"]\n',
                     "project/a.py": BAD, "plain/b.py": BAD})
    git_repository(tmp_path / "project")
    assert found(run("check", "-q", ".", cwd=tmp_path / "project")) == [("a.py", "RA200")]
    assert found(run("check", "-q", "a.py", cwd=tmp_path / "project")) == [("a.py", "RA200")]
    # Outside git, the work tree is the current folder (when the path is inside it), else the path named.
    assert found(run("check", "-q", ".", cwd=tmp_path / "plain")) == [("b.py", "RA200")]
    assert found(run("check", "-q", str(tmp_path / "plain"), cwd=tmp_path / "project")) == [
        (str(tmp_path / "plain" / "b.py"), "RA200")]
    # From the parent itself, its config applies to what is below it outside git.
    assert found(run("check", "-q", "plain", cwd=tmp_path)) == []


def test_each_file_has_its_nearest_config_whatever_the_argument_order(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA4"]\n',
                     "two/a/pyproject.toml": '[tool.rearr.check]\nignore = ["RA2"]\n', "two/a/m.py": BAD + AVG,
                     "two/b/rearr.toml": '[check]\nextend-ignore = ["RA400"]\n', "two/b/m.py": BAD + AVG,
                     "two/c/pyproject.toml": '[project]\nname = "c"\n', "two/c/m.py": BAD + AVG,
                     "m.py": BAD + AVG})
    git_repository(tmp_path)
    expected = [("m.py", "RA200"), ("two/a/m.py", "RA400"), ("two/b/m.py", "RA200"), ("two/c/m.py", "RA200")]
    assert found(run("check", "-q", ".", cwd=tmp_path)) == expected
    assert found(run("check", "-q", "two/c", "two/b", "two/a", "m.py", cwd=tmp_path)) == expected
    assert found(run("check", "-q", "two/a/m.py", "two/b/m.py", "two/c", ".", cwd=tmp_path)) == expected


def test_rearr_toml_wins_over_pyproject_in_one_folder(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA4"]\n', "rearr.toml": "[check]\n",
                     "m.py": BAD + AVG})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == [("m.py", "RA200"), ("m.py", "RA400")]


def test_config_names_one_file_for_every_file(tmp_path):
    write(tmp_path, {"ci.toml": '[check]\nselect = ["RA4"]\n', "sub/pyproject.toml": '[tool.rearr.check]\n'
                     'select = ["RA2"]\n', "sub/m.py": BAD + AVG, "m.py": BAD + AVG,
                     "base/pyproject.toml": '[project]\nname = "x"\n'})
    expected = [("m.py", "RA400"), ("sub/m.py", "RA400")]
    assert found(run("check", "-q", "--config", "ci.toml", ".", cwd=tmp_path)) == expected
    one_line_error(run("check", "--config", "missing.toml", ".", cwd=tmp_path), "--config missing.toml", "no such")
    one_line_error(run("check", "--config", "base/pyproject.toml", ".", cwd=tmp_path), "no [tool.rearr.check]")
    one_line_error(run("check", "--config", "base", ".", cwd=tmp_path), "--config base: a folder, not a file")


def test_the_work_tree_is_documented_as_the_code_finds_it(tmp_path, monkeypatch):
    write(tmp_path, {"repo/sub/a.py": "", "plain/b.py": ""})
    gitdir = git_repository(tmp_path / "elsewhere")
    (tmp_path / "repo" / ".git").write_text(f"gitdir: {gitdir}\n")  # a linked work tree, or a submodule
    monkeypatch.chdir(tmp_path / "plain")
    assert files.work_root(str(tmp_path / "repo" / "sub" / "a.py"), str(tmp_path / "repo" / "sub")) == \
        str(tmp_path / "repo")
    assert files.work_root(str(tmp_path / "plain" / "b.py"), str(tmp_path / "plain" / "b.py")) == \
        str(tmp_path / "plain")
    monkeypatch.chdir(tmp_path / "repo")
    assert files.work_root(str(tmp_path / "plain" / "b.py"), str(tmp_path / "plain")) == str(tmp_path / "plain")


# --- selection as ruff's ----------------------------------------------------------------------


def test_a_command_line_ignore_adds_to_the_configs(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA4"]\n',
                     "m.py": BAD + AVG + "rearr.repeat(x, 'h -> h w')\n"})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == [("m.py", "RA200"), ("m.py", "RA301")]
    assert found(run("check", "-q", "--ignore", "RA200", ".", cwd=tmp_path)) == [("m.py", "RA301")]
    # --select starts over from the command line's codes; --extend-select adds to the config's.
    assert found(run("check", "-q", "--select", "RA4", ".", cwd=tmp_path)) == [("m.py", "RA400")]
    assert found(run("check", "-q", "--extend-select", "RA400", ".", cwd=tmp_path)) == [
        ("m.py", "RA200"), ("m.py", "RA400"), ("m.py", "RA301")]


@pytest.mark.parametrize("args, needles", [
    (["--select", ""], ["--select names no code"]),
    (["--select", ","], ["--select names no code"]),
    (["--ignore", "RA"], ["no code is selected"]),
    (["--select", "E501"], ["unknown code or prefix 'E501'"]),
    (["--extend-exclude", "[z-a]"], ["--extend-exclude: the glob '[z-a]' is malformed"]),
    (["--exclude", "gen\\"], ["--exclude: the glob 'gen\\\\' is malformed", "escapes nothing"]),
    (["--per-file-ignores", "tests"], ["write GLOB:CODES"]),
    (["--per-file-ignores", "tests/**:RA9"], ["unknown code or prefix 'RA9'"]),
    (["--stdin-filename", "x.py", "."], ["pass - as the path"]),
    (["--statistics", "--output-format", "sarif"], ["--statistics prints text or json"]),
])
@pytest.mark.slow
def test_malformed_command_line_settings_are_exit_2_with_one_line(tmp_path, args, needles):
    write(tmp_path, {"m.py": BAD})
    one_line_error(run("check", *args, cwd=tmp_path), *needles)


def test_per_file_ignores(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check.per-file-ignores]\n"tests/" = ["RA2"]\n'
                                       '"!src/**" = ["RA4"]\n"__init__.py" = ["RA200"]\n',
                     "tests/deep/t.py": BAD + AVG, "src/m.py": BAD + AVG, "src/__init__.py": BAD, "x.py": BAD + AVG})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == [("src/m.py", "RA200"), ("src/m.py", "RA400"),
                                                           ("x.py", "RA200")]
    # The command line's --per-file-ignores replaces the config's; --extend-per-file-ignores adds.
    assert found(run("check", "-q", "--per-file-ignores", "x.py:RA4", ".", cwd=tmp_path)) == [
        ("src/__init__.py", "RA200"), ("src/m.py", "RA200"), ("src/m.py", "RA400"), ("tests/deep/t.py", "RA200"),
        ("tests/deep/t.py", "RA400"), ("x.py", "RA200")]
    assert found(run("check", "-q", "--extend-per-file-ignores", "src/m.py:RA2,RA4", ".", cwd=tmp_path)) == [
        ("x.py", "RA200")]


def test_force_exclude_leaves_named_files_out(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nextend-exclude = ["scratch/", "*_gen.py"]\n',
                     "scratch/s.py": BAD, "m_gen.py": BAD, "m.py": BAD, ".gitignore": "ignored.py\n",
                     "ignored.py": BAD})
    git_repository(tmp_path)
    named = ["scratch/s.py", "m_gen.py", "ignored.py", "m.py"]
    assert [p for p, _ in found(run("check", "-q", *named, cwd=tmp_path))] == sorted(named)
    assert found(run("check", "-q", "--force-exclude", *named, cwd=tmp_path)) == [("m.py", "RA200")]
    proc = run("check", "--force-exclude", "scratch/s.py", "m_gen.py", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "Nothing to check: 2 paths named, left out by the excludes "
                                                 "(force-exclude).\n")
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nextend-exclude = ["scratch/"]\nforce-exclude = true\n'})
    assert found(run("check", "-q", "scratch/s.py", "m.py", cwd=tmp_path)) == [("m.py", "RA200")]
    assert len(found(run("check", "-q", "--no-force-exclude", "scratch/s.py", "m.py", cwd=tmp_path))) == 2


def test_einops_can_be_turned_off(tmp_path):
    einops_bad = "import einops\neinops.rearrange(x, 'b c -> c')\n"
    write(tmp_path, {"m.py": einops_bad})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == [("m.py", "RA200")]
    assert run("check", "--no-einops", ".", cwd=tmp_path).stdout == \
        "No pattern found in 1 file: 1 file imports einops, whose checks are off (einops = false, or --no-einops).\n"
    write(tmp_path, {"pyproject.toml": "[tool.rearr.check]\neinops = false\n"})
    assert found(run("check", "-q", ".", cwd=tmp_path)) == []
    assert found(run("check", "-q", "--einops", ".", cwd=tmp_path)) == [("m.py", "RA200")]
    # Every reason is given: a rearr file without a literal pattern, and the einops file left alone.
    write(tmp_path, {"r.py": "import rearr\nrearr.rearrange(x, pattern)\n"})
    assert run("check", ".", cwd=tmp_path).stdout == (
        "No pattern found in 2 files: 1 file imports rearr, but no call has a pattern written as a string literal; "
        "1 file imports einops, whose checks are off (einops = false, or --no-einops).\n")


# --- stdin, --exit-zero ----------------------------------------------------------------------


def test_stdin_is_checked_as_the_file_it_names(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nper-file-ignores = { "tests/**" = ["RA4"] }\n'})
    source = BAD + AVG.split("\n", 1)[1]
    proc = run("check", "-q", "-", "--stdin-filename", "tests/t.py", cwd=tmp_path, stdin=source)
    assert found(proc) == [("tests/t.py", "RA200")]
    proc = run("check", "-q", "-", cwd=tmp_path, stdin=source)
    assert found(proc) == [("-", "RA200"), ("-", "RA400")]
    assert run("check", "-", cwd=tmp_path, stdin=b"import rearr\n# caf\xe9\n").returncode == 2
    one_line_error(run("check", "-", "a.py", cwd=tmp_path, stdin=""), "- (stdin) cannot be named with other paths")


def test_exit_zero_turns_findings_into_0_but_not_unreadable_input(tmp_path):
    write(tmp_path, {"m.py": BAD})
    assert run("check", "--exit-zero", ".", cwd=tmp_path).returncode == 0
    assert run("check", "--exit-zero", "missing.py", ".", cwd=tmp_path).returncode == 2


# --- symbolic links ---------------------------------------------------------------------------

posix_only = pytest.mark.skipif(os.name != "posix", reason="symbolic links as on POSIX")


@posix_only
def test_a_link_to_a_file_outside_the_work_tree_is_skipped_in_a_walk(tmp_path):
    write(tmp_path, {"outside/secret.py": BAD, "tree/inside.py": AVG, "tree/m.py": ""})
    git_repository(tmp_path / "tree")
    os.symlink(tmp_path / "outside" / "secret.py", tmp_path / "tree" / "link_out.py")
    os.symlink(tmp_path / "tree" / "inside.py", tmp_path / "tree" / "link_in.py")
    os.symlink(tmp_path / "outside", tmp_path / "tree" / "folder_link")  # a link to a folder is not walked
    proc = run("check", "-q", ".", cwd=tmp_path / "tree")
    assert found(proc) == [("inside.py", "RA400"), ("link_in.py", "RA400")]
    assert proc.stderr == (f"rearr check: note: link_out.py: skipped: a symbolic link to a file outside the work "
                           f"tree ({tmp_path / 'outside' / 'secret.py'})\n")
    assert proc.returncode == 1
    # Named on the command line, the link is read.
    assert found(run("check", "-q", "link_out.py", cwd=tmp_path / "tree")) == [("link_out.py", "RA200")]


# --- nothing printed raw ---------------------------------------------------------------------

RAW = [chr(c) for c in [*range(32), *range(127, 160)] if chr(c) != "\n"] + ["\u202e", "\u2028", "\u2029", "\ufeff"]


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif", "gitlab"])
def test_no_output_format_writes_a_raw_control_character(tmp_path, fmt):
    name = "evil\x1b[2J\n\x07\u202e.py"
    forged = f"\nforged.py:1:1: RA100 {name}"
    write(tmp_path, {name: BAD, f"x{forged}.py": BAD,
                     "pattern.py": "import rearr\nrearr.rearrange(x, 'b\x1b c -> c')\n"})
    os.mkfifo(tmp_path / "fifo\x1b.py")
    for args in [[], ["--statistics"] if fmt in ("text", "json") else []]:
        proc = run("check", "--output-format", fmt, *args, ".", "missing\x1b\n.py", cwd=tmp_path)
        assert proc.returncode == 2
        for stream in (proc.stdout, proc.stderr):
            assert not any(c in stream for c in RAW), (fmt, stream)
        if fmt == "text":
            assert not any(line.startswith("forged.py") for line in proc.stdout.splitlines())
        if fmt in ("json", "sarif", "gitlab") and not args:
            import json

            text = json.dumps(json.loads(proc.stdout))  # still JSON, and the names are whole
            assert "evil\\u001b[2J\\n\\u0007\\u202e.py" in text or "evil%1B%5B2J%0A%07%E2%80%AE.py" in text
    assert "missing\\x1b\\n.py: no such file or folder" in proc.stderr
    assert "fifo\\x1b.py: skipped: not a regular file (a FIFO)" in proc.stderr
