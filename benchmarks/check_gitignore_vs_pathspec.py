"""Not a timing: how often rearr check's .gitignore matcher, and the pathspec library's GitIgnoreSpec,
decide otherwise than git, on the generated trees of tests/tools/test_check_gitignore.py.

    python benchmarks/check_gitignore_vs_pathspec.py [--trees N]

Each tree is made, `git check-ignore` is asked about every path in it, and each matcher answers the
same question with git's rule for nested files (the deepest .gitignore with a matching line decides,
and nothing below an ignored folder comes back). It needs git, and pathspec (`pip install pathspec`),
which rearr does not depend on: docs/check.md says why.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import sys
import tempfile
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "tools")]

import test_check_gitignore as trees  # noqa: E402


def pathspec_ignores(pathspec, root: bytes, rel: bytes, is_dir: bool) -> bool | str:
    """pathspec's answer, with git's rule for nested files; 'raised' when it raises on a line."""
    parts = rel.split(b"/")
    chain = []
    for i in range(len(parts)):
        folder = os.path.join(root, *parts[:i]) if i else root
        try:
            with open(os.path.join(folder, b".gitignore"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            chain.append((folder, pathspec.GitIgnoreSpec.from_lines(lines)))
        except FileNotFoundError:
            pass
        except Exception:  # re.error on a line that git reads, such as [z-a]
            return "raised"
        path = os.path.join(root, *parts[: i + 1])
        folder_too = is_dir or i < len(parts) - 1
        for base, spec in reversed(chain):
            name = os.fsdecode(os.path.relpath(path, base)) + ("/" if folder_too else "")
            try:
                result = spec.check_file(name)
            except Exception:
                return "raised"
            if result.include is not None:
                if result.include:
                    return True
                break
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=400)
    args = parser.parse_args()
    try:
        import pathspec
    except ImportError:
        print("pathspec is not installed: pip install pathspec")
        return 2
    warnings.simplefilter("ignore")  # pathspec's regexes warn of nested sets
    counts = dict.fromkeys(["paths", "ignored", "rearr", "pathspec", "raised", "trees"], 0)
    for seed in range(args.trees):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            root = os.fsencode(os.path.join(tmp, "tree"))
            os.mkdir(root)
            trees.make_tree(rng, root)
            trees.git(root, "init", "-q")
            paths = trees.every_path(root)
            listed = trees.git(root, "check-ignore", "--stdin", "-z", stdin=b"\0".join(p for p, _ in paths) + b"\0")
            ignored = set(listed.split(b"\0")) - {b""}
            differs = False
            for rel, is_dir in paths:
                theirs = rel in ignored
                counts["paths"] += 1
                counts["ignored"] += theirs
                counts["rearr"] += trees.ours(root, rel, is_dir) != theirs
                answer = pathspec_ignores(pathspec, root, rel, is_dir)
                counts["raised"] += answer == "raised"
                counts["pathspec"] += answer != "raised" and answer != theirs
                differs |= answer != theirs
            counts["trees"] += differs
    print(f"{args.trees} trees, {counts['paths']:,} paths, {counts['ignored']:,} ignored by git")
    print(f"  rearr check: {counts['rearr']:,} paths decided otherwise than git")
    print(f"  pathspec {pathspec.__version__}: {counts['pathspec']:,} paths decided otherwise, "
          f"{counts['raised']:,} on which it raised; {counts['trees']} trees with a difference")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
