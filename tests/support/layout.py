"""The tree's layout as pyproject.toml declares it: which folder holds which package.

`package_dirs()` is `[tool.setuptools.package-dir]`: import name -> folder, for every
top-level part (`etcdspec` -> `etcdspec/`, `etcdspec.cli` -> `cli/`, ...). The tests that
walk the tree by part (layering, packaging) read it here rather than restate it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def package_dirs() -> dict[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        config = tomllib.load(file)
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {str(name): str(folder) for name, folder in mapping.items()}
