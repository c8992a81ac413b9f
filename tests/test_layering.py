"""The layers of the tree and who may import whom (docs/ARCHITECTURE.md, "Layers").

Every module of the package is read (not imported) and each `import etcdspec...` in it,
at any depth (an import inside a function counts too), is held against the rules below.
A module that belongs to no layer fails too, so that a new folder is given its place.

    cli -> conform -> checker -> model -> etcdspec (the shared base); model.refinement -> spec
    cli -> conform -> impl (the wire types, the launcher, the failpoint names)
    impl: tools -> server -> api -> kv;  api -> rpc;  server -> storage -> raft
    (each impl layer also on impl's base: errors, failpoints, pb)

The rules of independence (DESIGN.md) are among them: impl imports neither model nor
spec (it is checked against them, so it must not share their code); the checker proper
imports neither impl nor the conformance harness; model imports spec only in its
refinement checks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from layout import ROOT, package_dirs

FOLDERS = package_dirs()  # import name -> folder, as pyproject.toml maps them

BASE = "etcdspec.base"  # the shared base: the modules of the etcdspec/ folder
IMPL_BASE = ("etcdspec.impl.errors", "etcdspec.impl.failpoints", "etcdspec.impl.pb")


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]  # module-name prefixes that make up the layer
    may_import: tuple[str, ...]  # layer names (itself always allowed)


LAYERS = (
    Layer(BASE, (), ()),
    Layer("spec", ("etcdspec.spec",), (BASE,)),
    Layer("model.refinement", ("etcdspec.model.refinement",), (BASE, "spec", "model")),
    # The rest of the model uses the refinement checks only on request (explore --refine).
    Layer("model", ("etcdspec.model",), (BASE, "model.refinement")),
    Layer("impl.base", IMPL_BASE, (BASE,)),
    Layer("impl.raft", ("etcdspec.impl.raft",), (BASE, "impl.base")),
    Layer("impl.rpc", ("etcdspec.impl.rpc",), (BASE,)),
    Layer("impl.storage", ("etcdspec.impl.storage",), (BASE, "impl.base", "impl.raft")),
    Layer("impl.kv", ("etcdspec.impl.kv",), (BASE, "impl.base")),
    Layer("impl.api", ("etcdspec.impl.api",), (BASE, "impl.base", "impl.kv", "impl.rpc")),
    Layer(
        "impl.server",
        ("etcdspec.impl.server",),
        (BASE, "impl.base", "impl.raft", "impl.rpc", "impl.storage", "impl.kv", "impl.api"),
    ),
    Layer(
        "impl.tools",
        ("etcdspec.impl.tools",),
        (BASE, "impl.base", "impl.raft", "impl.storage", "impl.kv", "impl.server"),
    ),
    Layer("impl", ("etcdspec.impl",), ()),  # the package itself (impl/__init__.py)
    Layer("checker", ("etcdspec.checker",), (BASE, "model")),
    Layer(
        "conform",
        ("etcdspec.conform",),
        (BASE, "model", "checker", "impl.base", "impl.tools"),
    ),
    Layer("cli", ("etcdspec.cli",), ("*",)),
    Layer("entry", ("etcdspec.__main__",), ("cli",)),  # `python -m etcdspec`
)
BY_NAME = {layer.name: layer for layer in LAYERS}


BASE_MODULES = {"etcdspec"} | {
    f"etcdspec.{p.stem}" for p in (ROOT / "etcdspec").glob("*.py") if p.stem != "__main__"
}


def layer_of(module: str) -> Layer | None:
    """The layer of a module, or of a name inside one: the base for the modules of the
    etcdspec/ folder, else the layer with the longest prefix of the name."""
    if module in BASE_MODULES or module.rsplit(".", 1)[0] in BASE_MODULES - {"etcdspec"}:
        return BY_NAME[BASE]
    if module == "etcdspec.__main__":
        return BY_NAME["entry"]
    if module.startswith("etcdspec.__"):  # etcdspec.__version__ and the like
        return BY_NAME[BASE]
    best: Layer | None = None
    for layer in LAYERS:
        for prefix in layer.modules:
            matches = module == prefix or module.startswith((prefix + ".", prefix + "_"))
            if matches and (best is None or len(prefix) > max(map(len, best.modules))):
                best = layer
    return best


def modules() -> list[tuple[str, Path]]:
    found = []
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join((package, *parts)), path))
    return found


def imports(path: Path) -> list[tuple[str, int]]:
    """The etcdspec names `path` imports, at any depth, with their line numbers:
    `from etcdspec.impl import errors` imports etcdspec.impl.errors."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.append((f"relative import of {node.module or '.'}", node.lineno))
                continue
            out.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
    return [(n, line) for n, line in out if n.startswith(("etcdspec", "relative import"))]


def violations() -> list[str]:
    found = []
    for module, path in modules():
        own = layer_of(module)
        if own is None:
            found.append(f"{path.relative_to(ROOT)}: module {module} belongs to no layer")
            continue
        for name, line in imports(path):
            target = layer_of(name)
            if name.startswith("relative import"):
                found.append(f"{path.relative_to(ROOT)}:{line}: a {name}: import by full name")
            elif target is None:
                found.append(
                    f"{path.relative_to(ROOT)}:{line}: imports {name}, which belongs to no layer"
                )
            elif (
                target.name != own.name
                and "*" not in own.may_import
                and target.name not in own.may_import
            ):
                found.append(
                    f"{path.relative_to(ROOT)}:{line}: {own.name} imports {name} ({target.name}); "
                    f"{own.name} may import only {', '.join(own.may_import) or 'itself'}"
                )
    return found


def test_every_import_keeps_to_the_layers() -> None:
    problems = violations()
    assert not problems, "forbidden imports:\n" + "\n".join(problems)


def test_the_rules_see_every_module_and_the_imports_in_functions() -> None:
    """The check reads the whole tree and the imports at any depth: it is not vacuous."""
    found = modules()
    assert len(found) > 150
    names = {module for module, _ in found}
    assert {"etcdspec.verdict", "etcdspec.impl.server.member", "etcdspec.conform.run"} <= names
    # cli/serve.py imports the server inside its command function.
    serve = dict(found)["etcdspec.cli.serve"]
    assert any(name.startswith("etcdspec.impl.server") for name, _ in imports(serve))


@pytest.mark.parametrize(
    ("module", "imported", "allowed"),
    [
        ("etcdspec.impl.raft.core", "etcdspec.impl.server.member", False),
        ("etcdspec.impl.api.kv", "etcdspec.impl.server.member", False),
        ("etcdspec.impl.server.member", "etcdspec.impl.api.serve", True),
        ("etcdspec.impl.kv.mvcc", "etcdspec.impl.raft.messages", False),
        ("etcdspec.impl.server.member", "etcdspec.model.store", False),
        ("etcdspec.checker.check", "etcdspec.impl.pb.rpc_pb2", False),
        ("etcdspec.checker.check", "etcdspec.conform.run", False),
        ("etcdspec.conform.run", "etcdspec.checker.check", True),
        ("etcdspec.conform.targets", "etcdspec.impl.tools.launcher", True),
        ("etcdspec.conform.run", "etcdspec.impl.server.member", False),
        ("etcdspec.model.cluster", "etcdspec.spec.ast", False),
        ("etcdspec.model.refinement", "etcdspec.spec.ast", True),
        ("etcdspec.verdict", "etcdspec.model.store", False),
        ("etcdspec.cli.verify", "etcdspec.conform.stage", True),
    ],
)
def test_the_rules_forbid_what_the_architecture_forbids(
    module: str, imported: str, allowed: bool
) -> None:
    own, target = layer_of(module), layer_of(imported)
    assert own is not None and target is not None
    permitted = own.name == target.name or "*" in own.may_import or target.name in own.may_import
    assert permitted is allowed
