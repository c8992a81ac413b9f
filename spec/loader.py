"""Find, parse and type-check a spec: by built-in name (raft, raft_steps, mvcc, lease,
auth, raft_member) or by path.

`load_spec(name, mutation=None)` returns a `LoadedSpec` (the AST, with the mutation
switched on if one is named, and its symbol tables). It raises `SpecLookupError` for an
unknown spec file or mutation and `SpecErrors` for syntax or type errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from etcdspec.spec import ast
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.parser import parse_spec
from etcdspec.spec.typecheck import SpecInfo, apply_mutation, check

SPEC_DIR = Path(__file__).parent
# Every shipped spec has a built-in name; the default set (`etcdspec prove`, the `verify`
# stage) is raft, raft_steps, mvcc, lease and auth. raft_steps.spec (the step-level Raft
# the model refines) joined it once each spec's proof ran in a Z3 context of its own
# (etcdspec.spec.prove.Prover): before, its model searches cost 10x more after raft's
# proof in the same process (docs/benchmarks.md, issue 23).
# raft_member.spec (Raft with configuration changes) is proved by `verify`'s spec stage
# (etcdspec.spec.stage.STAGE_SPECS), not by default here: its proof takes about 6 s.
SPEC_NAMES = ("raft", "raft_steps", "mvcc", "lease", "auth", "raft_member")
BUILTIN_SPECS = ("raft", "raft_steps", "mvcc", "lease", "auth")


@dataclass(frozen=True)
class LoadedSpec:
    name: str
    spec: ast.Spec
    info: SpecInfo
    mutation: str | None = None

    def describe(self) -> str:
        suffix = f" with mutation {self.mutation}" if self.mutation else ""
        return f"{self.name}{suffix}"


def resolve(name: str) -> Path:
    """The file a spec name refers to: a built-in name or a path."""
    if name in SPEC_NAMES:
        return SPEC_DIR / f"{name}.spec"
    path = Path(name)
    if path.is_file():
        return path
    known = ", ".join(SPEC_NAMES)
    raise SpecLookupError(f"unknown spec '{name}': not a file, nor a built-in spec ({known})")


def load_text(text: str, filename: str, mutation: str | None = None) -> LoadedSpec:
    spec = parse_spec(text, filename)
    check(spec)  # the unmutated spec must be well typed, mutations included
    if mutation is not None:
        spec = apply_mutation(spec, mutation)
    name = Path(filename).stem
    return LoadedSpec(name, spec, check(spec), mutation)


def load_spec(name: str, mutation: str | None = None) -> LoadedSpec:
    path = resolve(name)
    return load_text(path.read_text(), _display(path), mutation)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
