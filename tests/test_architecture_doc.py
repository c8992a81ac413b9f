"""docs/ARCHITECTURE.md names every file of the tree: the map stays true as files come.

Every file git tracks must match a path the page names in backquotes: a path as it is, a
glob (`tests/model/test_store_*.py`), braces for alternatives
(`tests/impl/kv/test_impl_{mvcc,lessor}.py`) or a folder (`tests/checker/data/`). A
named path under a top-level folder that matches no file fails too, so that the page
does not keep files gone (a folder named in prose, such as `raft/`, is not a path).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
# A backquoted token that may name a path (import names and flags are left out).
_TOKEN = re.compile(r"`([^`\s]+)`")
_PATHLIKE = re.compile(r"^[\w.*{}/,-]+$")


def _expand(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for option in match.group(1).split(",") for p in _expand(head + option + tail)]


def named_patterns(text: str) -> list[str]:
    patterns = []
    for token in _TOKEN.findall(text):
        if _PATHLIKE.match(token) and not token.startswith(("etcdspec.", "--")):
            patterns.extend(_expand(token))
    return patterns


def tracked_files() -> list[str]:
    """The files git tracks; outside a git checkout (an unpacked copy), every file but
    those .gitignore leaves out."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0:
        return [line for line in listed.stdout.splitlines() if line]
    ignored = [
        line.strip().rstrip("/")
        for line in (ROOT / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*")
        if path.is_file()
        and ".git" not in path.relative_to(ROOT).parts
        and not any(
            fnmatch.fnmatch(part, pattern)
            for part in path.relative_to(ROOT).parts
            for pattern in ignored
        )
    )


def _covers(pattern: str, path: str) -> bool:
    """Whether `pattern` names `path`: the file itself, a glob over it, or its folder."""
    folder = pattern.rstrip("/") + "/"
    return path.startswith(folder) or fnmatch.fnmatch(path, pattern)


def test_every_file_is_on_the_architecture_page() -> None:
    patterns = named_patterns(PAGE.read_text())
    files = tracked_files()
    missing = [path for path in files if not any(_covers(p, path) for p in patterns)]
    assert not missing, "not on docs/ARCHITECTURE.md (one line per file):\n" + "\n".join(missing)


def test_every_path_on_the_page_exists() -> None:
    files = tracked_files()
    tops = {path.split("/")[0] for path in files}
    stale = [
        p
        for p in named_patterns(PAGE.read_text())
        if p.split("/")[0] in tops and not any(_covers(p, path) for path in files)
    ]
    assert not stale, "named on docs/ARCHITECTURE.md but not in the tree:\n" + "\n".join(stale)


def test_the_patterns_read_as_intended() -> None:
    text = "`a/{b,c}.py` and `x/*.txt`, `data/`, `Makefile`, `etcdspec.impl.raft`, `--flag`, `make test`"
    assert named_patterns(text) == ["a/b.py", "a/c.py", "x/*.txt", "data/", "Makefile"]
    assert _covers("data/", "data/one.json") and _covers("impl/pb", "impl/pb/rpc.proto")
    assert not _covers("a/b.py", "a/bb.py")
