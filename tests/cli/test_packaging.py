"""Packaging: the folder -> etcdspec.* mapping works for normal and editable installs.

Each install goes into a scratch folder and is inspected by a Python started with -S, so
the project's own editable install in .venv cannot make the test pass by accident — and
is never touched (pip, even with --prefix, would replace it: hence --ignore-installed for
the normal install, and an unpacked PEP 660 wheel for the editable one).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from layout import ROOT, package_dirs

# part -> folder ("etcdspec" for the base, "cli" for etcdspec.cli, ...), as pyproject maps them.
FOLDERS = {name.removeprefix("etcdspec."): folder for name, folder in package_dirs().items()}
DATA_SUFFIXES = {".lark", ".spec", ".hints", ".json", ".proto", ".typed"}


def _packages() -> list[str]:
    """Every package of the tree under its import name: each folder with an __init__.py."""
    names = []
    for package, folder in FOLDERS.items():
        base = "etcdspec" if package == "etcdspec" else f"etcdspec.{package}"
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(ROOT / folder).parts
            names.append(".".join((base, *parts)))
    return names


PROBE = (
    "import importlib.util\n"
    f"for name in {[*_packages(), 'etcdspec.cli.main']!r}:\n"
    "    print(name, importlib.util.find_spec(name).origin)\n"
)


def _origins(site_setup: str) -> dict[str, Path]:
    out = subprocess.run(
        [sys.executable, "-S", "-c", site_setup + PROBE],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
    ).stdout
    return {line.split(" ", 1)[0]: Path(line.split(" ", 1)[1]) for line in out.splitlines()}


def _data_files(folder: str) -> list[Path]:
    source = ROOT / folder
    return [
        p.relative_to(source)
        for p in source.rglob("*")
        if p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts
    ]


@pytest.mark.slow
def test_normal_install_maps_every_folder_and_ships_its_data(tmp_path: Path) -> None:
    target = tmp_path / "target"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--ignore-installed",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    origins = _origins(f"import sys; sys.path.insert(0, {str(target)!r})\n")
    assert origins["etcdspec.model"] == target / "etcdspec" / "model" / "__init__.py"
    assert origins["etcdspec.spec"] == target / "etcdspec" / "spec" / "__init__.py"
    assert origins["etcdspec.cli.main"] == target / "etcdspec" / "cli" / "main.py"
    # Every package of the tree is installed (a sub-package missing from pyproject's
    # list would import here only from the working tree, not from the install).
    for name in _packages():
        assert origins[name] == target.joinpath(*name.split(".")) / "__init__.py", name
    assert (target / "etcdspec" / "py.typed").exists()
    for package, folder in FOLDERS.items():
        installed = target / "etcdspec" if package == "etcdspec" else target / "etcdspec" / package
        for relative in _data_files(folder):
            assert (installed / relative).exists(), f"{folder}/{relative} is not installed"


@pytest.mark.slow
def test_editable_install_imports_from_the_working_tree(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_editable({str(wheels)!r})",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    site_dir = tmp_path / "site"
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site_dir)
    origins = _origins(f"import site; site.addsitedir({str(site_dir)!r})\n")
    assert origins["etcdspec.model"] == ROOT / "model" / "__init__.py"
    assert origins["etcdspec.checker"] == ROOT / "checker" / "__init__.py"
    assert origins["etcdspec.cli.main"] == ROOT / "cli" / "main.py"
    assert origins["etcdspec.conform"] == ROOT / "conform" / "__init__.py"
    assert origins["etcdspec.impl.server"] == ROOT / "impl" / "server" / "__init__.py"
