"""`rearr check` on hostile inputs and surroundings: configs that are no configs, a current folder or
streams that are gone, unreadable ignore files, files that cannot be written. Each ends in exit 2 with
one clear line, or does what git does; never a traceback, never a result that is silently wrong."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import REPO, git_repository, one_line_error, run, write

from rearr.tools import cli, ignore, lint

BAD = "import rearr\nrearr.rearrange(x, 'b c -> c')\n"  # RA200 at 2:21
CLEAN = "import rearr\nrearr.rearrange(x, 'b c -> c b')\n"
HH = "import rearr\nrearr.rearrange(x, '(h w) c -> h w c', hh=2)\n"  # RA300, fixed by renaming hh= to h=
POSIX = pytest.mark.skipif(os.name != "posix", reason="POSIX file descriptors and permissions")


def codes(proc) -> list[tuple[str, str]]:
    return [(line.split(":")[0], line.split()[1]) for line in proc.stdout.splitlines() if ": RA" in line]


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A shell command line, with ``$RC`` for the console script (the same interpreter and checkout)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "RC": f"{sys.executable} -m rearr.tools.cli"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


# --- config files --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pyproject.toml", "rearr.toml"])
def test_a_value_nested_too_deeply_is_exit_2_with_one_line(tmp_path, name):
    table = "[tool.rearr.check]" if name == "pyproject.toml" else "[check]"
    write(tmp_path, {"a.py": CLEAN, name: f"{table}\nselect = {'[' * 3000}{']' * 3000}\n"})
    one_line_error(run("check", "a.py", cwd=tmp_path), f"{name}: invalid TOML", "nested too deeply")
    write(tmp_path, {"ci.toml": f"[check]\nselect = {'{a=' * 3000}1{'}' * 3000}\n"})
    one_line_error(run("check", "--config", "ci.toml", "a.py", cwd=tmp_path), "ci.toml: invalid TOML", "nested")


def test_a_config_that_starts_with_a_bom_is_told_so(tmp_path):
    write(tmp_path, {"a.py": CLEAN, "rearr.toml": b'\xef\xbb\xbf[check]\nignore = ["RA2"]\n'})
    one_line_error(run("check", "a.py", cwd=tmp_path), "rearr.toml: invalid TOML", "starts with a UTF-8 BOM",
                   "save it without one")


def test_a_config_larger_than_16_mib_is_refused_unread(tmp_path):
    write(tmp_path, {"a.py": CLEAN, "rearr.toml": "[check]\n" + "# padding\n" * (2 * 2**20)})
    one_line_error(run("check", "a.py", cwd=tmp_path), "rearr.toml: too large to be a config", "16 MiB")


def test_config_naming_nothing_a_fifo_or_a_device_says_what_it_is(tmp_path):
    write(tmp_path, {"a.py": CLEAN})
    one_line_error(run("check", "--config", "", "a.py", cwd=tmp_path), "--config names no file")
    (tmp_path / "d").mkdir()
    one_line_error(run("check", "--config", "d", "a.py", cwd=tmp_path), "--config d: a folder, not a file")
    if os.name == "posix":
        os.mkfifo(tmp_path / "p.toml")
        one_line_error(run("check", "--config", "p.toml", "a.py", cwd=tmp_path),
                       "--config p.toml: not a regular file (a FIFO)")
        one_line_error(run("check", "--config", os.devnull, "a.py", cwd=tmp_path),
                       "not a regular file (a character device)")
    write(tmp_path, {"other.toml": "[other]\nx = 1\n"})
    one_line_error(run("check", "--config", "other.toml", "a.py", cwd=tmp_path), "it has no [check] table")


def test_a_rearr_toml_without_a_check_table_is_no_config(tmp_path):
    # The search goes on above it: the project's pyproject still applies.
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA2"]\n', "pkg/a.py": BAD,
                     "pkg/rearr.toml": ""})
    git_repository(tmp_path)
    assert run("check", "pkg", cwd=tmp_path).returncode == 0
    write(tmp_path, {"pkg/rearr.toml": "[other]\nx = 1\n"})
    assert run("check", "pkg", cwd=tmp_path).returncode == 0
    write(tmp_path, {"rearr.toml": "[other]\nx = 1\n"})  # beside the pyproject, in the same folder
    (tmp_path / "pkg" / "rearr.toml").unlink()
    assert run("check", "pkg", cwd=tmp_path).returncode == 0
    write(tmp_path, {"pkg/rearr.toml": "[check]\n"})  # an empty [check] table is a config: the defaults
    assert codes(run("check", "pkg", cwd=tmp_path)) == [("pkg/a.py", "RA200")]


@POSIX
def test_a_config_linked_from_outside_the_work_tree_is_skipped_with_a_note(tmp_path):
    write(tmp_path, {"elsewhere.toml": '[tool.rearr.check]\nignore = ["RA2"]\n', "repo/a.py": BAD,
                     "repo/inside.toml": '[tool.rearr.check]\nignore = ["RA2"]\n'})
    git_repository(tmp_path / "repo")
    (tmp_path / "repo" / "pyproject.toml").symlink_to(tmp_path / "elsewhere.toml")
    proc = run("check", ".", cwd=tmp_path / "repo")
    assert (proc.returncode, codes(proc)) == (1, [("a.py", "RA200")])
    assert proc.stderr == (f"rearr check: note: pyproject.toml: skipped: a symbolic link to a file outside the "
                           f"work tree ({os.path.realpath(tmp_path / 'elsewhere.toml')})\n")
    (tmp_path / "repo" / "pyproject.toml").unlink()
    (tmp_path / "repo" / "pyproject.toml").symlink_to("inside.toml")  # a link inside the tree is read
    assert run("check", ".", cwd=tmp_path / "repo").returncode == 0


# --- the work tree and its ignore files ----------------------------------------------------------


def test_an_empty_dot_git_is_no_work_tree(tmp_path):
    # git takes vendored/ for part of the outer repository: its .gitignore and its config apply there.
    write(tmp_path, {"pyproject.toml": '[tool.rearr.check]\nignore = ["RA3"]\n', ".gitignore": "gen_*.py\n",
                     "vendored/gen_a.py": HH, "vendored/b.py": HH})
    git_repository(tmp_path)
    (tmp_path / "vendored" / ".git").mkdir()
    assert run("check", ".", cwd=tmp_path).returncode == 0
    assert ignore.work_tree(str(tmp_path / "vendored")) == str(tmp_path)
    (tmp_path / "vendored" / ".git").rmdir()
    (tmp_path / "vendored" / ".git").write_text("")  # an empty file: no gitdir
    assert run("check", ".", cwd=tmp_path).returncode == 0
    (tmp_path / "vendored" / ".git").write_text("gitdir: ../nowhere\n")  # a gitdir that is no repository
    assert run("check", ".", cwd=tmp_path).returncode == 0
    (tmp_path / "vendored" / ".git").unlink()
    git_repository(tmp_path / "vendored")  # a real repository: its own work tree, without the outer config
    assert sorted(codes(run("check", ".", cwd=tmp_path))) == [("vendored/b.py", "RA300"),
                                                             ("vendored/gen_a.py", "RA300")]


@pytest.mark.parametrize(("config", "folded"), [
    ("[core]\n\tignorecase = true\n", True),
    ("[CORE]\n  IgnoreCase = yes ; a comment\n", True),
    ("[core] ignorecase\n", True),  # a key without a value is true, as git reads it
    ("[core]\nignorecase = true\nignorecase = false\n", False),  # the last one wins
    ('[core "sub"]\nignorecase = true\n', False),  # a subsection is another section
    ("[user]\nignorecase = true\n", False),
    ("", False),
])
def test_core_ignorecase_is_read_from_the_repository(tmp_path, config, folded):
    write(tmp_path, {"Build/x.py": BAD, "a.py": CLEAN, ".gitignore": "build/\n"})
    (git_repository(tmp_path) / "config").write_text(config)
    assert ignore.ignore_case(str(tmp_path)) is folded
    # git leaves out Build/ for the line build/ when core.ignorecase is true (its default on macOS and Windows)
    assert codes(run("check", ".", cwd=tmp_path)) == ([] if folded else [("Build/x.py", "RA200")])


@POSIX
def test_info_exclude_is_read_through_a_link_as_git_reads_it(tmp_path):
    write(tmp_path, {"shared-exclude": "gen.py\n", "repo/gen.py": BAD, "repo/a.py": CLEAN})
    git = git_repository(tmp_path / "repo")
    (git / "info" / "exclude").symlink_to(tmp_path / "shared-exclude")
    proc = run("check", ".", cwd=tmp_path / "repo")
    assert (proc.returncode, codes(proc)) == (0, [])


def test_an_unreadable_gitignore_is_exit_2_and_named(tmp_path, monkeypatch, capsys):
    # Root reads every file: the refusal is simulated where the ignore file is opened.
    write(tmp_path, {".gitignore": "gen.py\n", "gen.py": BAD, "a.py": CLEAN})
    git_repository(tmp_path)
    real_open = os.open

    def refusing(path, flags, *args):
        if os.fspath(path).endswith(".gitignore"):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(ignore.os, "open", refusing)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "."]) == 2
    out, err = capsys.readouterr()
    assert err == "rearr check: .gitignore: Permission denied\n"
    assert out.endswith("1 path could not be read.\n")  # gen.py is checked, as git would list it: the RA200 shows
    assert "gen.py:2:21: RA200" in out


@POSIX
def test_an_unreadable_gitignore_as_a_user(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    write(tmp_path, {".gitignore": "gen.py\n", "gen.py": BAD})
    git_repository(tmp_path)
    (tmp_path / ".gitignore").chmod(0)
    proc = run("check", ".", cwd=tmp_path)
    assert proc.returncode == 2 and "rearr check: .gitignore: Permission denied" in proc.stderr


# --- the command line, the current folder and the streams ----------------------------------------


def test_an_unknown_option_is_written_back_printable(tmp_path):
    write(tmp_path, {"a.py": CLEAN})
    proc = run("check", "--\x1b]0;title\x07\x1b[2J", "a.py", cwd=tmp_path)
    assert proc.returncode == 2 and "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "unrecognized arguments: --\\x1b]0;title\\x07\\x1b[2J" in proc.stderr


@POSIX
def test_a_current_folder_that_is_gone_is_exit_2_with_one_line(tmp_path):
    write(tmp_path, {"a.py": CLEAN})
    (tmp_path / "gone").mkdir()
    proc = shell(f"cd gone && rmdir ../gone && $RC check {tmp_path / 'a.py'}", tmp_path)
    one_line_error(proc, "the current folder cannot be read", "run rearr check from a folder that exists")


@POSIX
def test_closed_or_full_streams(tmp_path):
    write(tmp_path, {"clean.py": CLEAN, "bad.py": BAD})
    closed_err = shell("$RC check clean.py 2>&- >/dev/null; echo $?", tmp_path)
    assert closed_err.stdout == "0\n" and closed_err.stderr == ""
    closed_out = shell("$RC check clean.py >&-; echo $? >&2", tmp_path)
    assert closed_out.stderr == "0\n"
    found = shell("$RC check bad.py >&-; echo $? >&2", tmp_path)
    assert found.stderr == "1\n"  # the verdict stands, though no one reads it
    missing = shell("$RC check nowhere.py 2>&-", tmp_path)
    assert missing.returncode == 2 and "nowhere" not in missing.stdout  # stderr's lines do not go to stdout
    usage = shell("$RC check --bogus clean.py 2>&-", tmp_path)
    assert (usage.returncode, usage.stdout) == (2, "")
    if os.path.exists("/dev/full"):
        full = shell("$RC check clean.py >/dev/full", tmp_path)
        assert full.returncode == 2 and "Traceback" not in full.stderr
        assert full.stderr == "rearr check: cannot write the output: No space left on device\n"
        both = shell("$RC check clean.py >/dev/full 2>&1", tmp_path)
        assert both.returncode == 2


# --- --diff, --add-noqa and --fix ------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--diff", "--add-noqa"])
def test_diff_and_add_noqa_print_the_files_that_could_not_be_checked(tmp_path, option):
    write(tmp_path, {"syn.py": "import rearr\ndef (:\n", "latin.py": b"import rearr\n# caf\xe9\n", "hh.py": HH})
    proc = run("check", option, "syn.py", "latin.py", "hh.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "latin.py:2:6: RA002 the file is not UTF-8" in proc.stderr
    assert "syn.py:2:5: RA001" in proc.stderr


def test_fix_of_a_file_that_cannot_be_written_keeps_its_findings(tmp_path, monkeypatch, capsys):
    # Root writes every file: the refusal is simulated where check opens the file to write it.
    write(tmp_path, {"a.py": HH, "b.py": HH})

    def refusing(path, mode="r", *args, **kwargs):
        if "w" in mode and os.path.basename(path) == "a.py":
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return open(path, mode, *args, **kwargs)

    monkeypatch.setattr(cli, "open", refusing, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "--fix", "a.py", "b.py"]) == 2
    out, err = capsys.readouterr()
    assert err == "rearr check: a.py: cannot write the fixes: Permission denied\n"
    assert out == ("a.py:2:20: RA300 length keyword hh= names no axis of the pattern (fix: rename hh= to h= "
                   "(the axes are c, h, w))\n"
                   "Fixed 1 problem; found 1 problem in 1 file (2 files, 2 rearr patterns checked). "
                   "The fixes of 1 file could not be written.\n")
    assert (tmp_path / "a.py").read_text() == HH and "h=2" in (tmp_path / "b.py").read_text()


@POSIX
def test_fix_of_a_read_only_file_as_a_user(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes every file")
    write(tmp_path, {"a.py": HH})
    (tmp_path / "a.py").chmod(0o444)
    proc = run("check", "--fix", "a.py", cwd=tmp_path)
    assert proc.returncode == 2 and codes(proc) == [("a.py", "RA300")] and "Fixed" not in proc.stdout


# --- output ----------------------------------------------------------------------------------------


@POSIX
def test_a_backslash_in_a_file_name_is_escaped_so_that_names_stay_distinct(tmp_path):
    write(tmp_path, {"a\x1b.py": BAD, "a\\x1b.py": BAD})
    lines = run("check", "-q", ".", cwd=tmp_path).stdout.splitlines()
    assert sorted(line.split(":2:21:")[0] for line in lines) == ["a\\\\x1b.py", "a\\x1b.py"]


# --- literals the library refuses ------------------------------------------------------------------


@pytest.mark.parametrize(("literal", "code", "text"), [
    ("h=[3]", "RA305", "length h=[3] is a list, not an integer (fix: pass the int it holds: h=3)"),
    ("h=(3,)", "RA305", "length h=(3,) is a tuple, not an integer (fix: pass the int it holds: h=3)"),
    ("h=[3, 2]", "RA305", "length h=[3, 2] is a list, not an integer"),
])
def test_a_length_in_a_list_or_tuple_is_reported(literal, code, text):
    source = f"import rearr\nrearr.rearrange(x, '(h w) c -> h w c', {literal})\n"
    (problem,) = lint.check_source(source, "a.py")
    assert (problem.code, problem.line) == (code, 2) and problem.text.startswith(text)


@pytest.mark.parametrize("fill", ["[0]", "(0,)", "[0.0, 1.0]"])
def test_a_fill_in_a_list_or_tuple_is_reported(fill):
    source = f"from rearr.layers import Scatter\nScatter('k -> n[i]', 'sum', fill={fill}, n=4)\n"
    (problem,) = lint.check_source(source, "a.py")
    assert problem.code == "RA500" and "fill= must be a number" in problem.text


def test_an_index_given_as_a_list_is_no_false_alarm():
    source = "import rearr\nrearr.scatter(x, 'k -> n[i]', 'sum', i=[0, 1], n=4)\n"
    assert lint.check_source(source, "a.py") == []
