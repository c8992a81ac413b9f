"""Proof hints: which invariants each induction query needs, from Z3's unsat cores.

A preservation query asks `axioms ∧ (every property, pre) ∧ guard ⇒ P (post)`. Asking it
with only the properties its proof uses is cheaper, and SOUND to try first: if the query
with a subset of the hypotheses is unsat, so is the query with all of them. `prove`
therefore tries a hinted query first, on a small budget, and falls back to the full
query when it is not unsat (sat, unknown, out of budget): a stale or wrong hint costs
time, never a verdict, and a counterexample always comes from the full query.

The hints live in a sidecar next to the spec (`raft.spec` -> `raft.hints`), a
versioned JSON document (`HINTS_SCHEMA`), one entry per (property, action): the names
of the properties the proof used (the core) and a fingerprint of the texts it depends
on (the spec's sorts, symbols, axioms and definitions; the action's body; the property;
the core's properties). An entry whose fingerprint does not match the spec as loaded
(an edited spec, a mutation switched on in that action) is stale: ignored, and counted.

`write_hints(loaded)` computes the cores (each query on a fresh solver in a fresh Z3
context, every property behind an assumption literal), minimises each by deletion
within `HINT_TRY_MS` of Z3 work per check, keeps only a core whose hinted query is
unsat within that budget, and writes the sidecar. Reading and writing the sidecar are
the only I/O; `compute_hints` does none. The sidecars ship with the package
(pyproject.toml package data "*.hints"). Regenerate them after editing a spec:
`python -m etcdspec.spec.hints [SPEC...]` (tests/spec/test_spec_hints.py fails on a
stale or missing hint of a built-in spec, naming that command).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import z3

from etcdspec.spec import ast
from etcdspec.spec.discharge import settle
from etcdspec.spec.errors import SpecLookupError
from etcdspec.spec.loader import LoadedSpec
from etcdspec.spec.printer import print_decl, print_stmt
from etcdspec.spec.solving import Budget, configure

HINTS_SCHEMA = "etcdspec.hints/1"
HINTS_SUFFIX = ".hints"  # JSON inside
# Z3 work a hinted query may take before `prove` falls back to the full query, in ms of
# an idle core (etcdspec.spec.prove turns it into rlimit): half the full query's first
# try. `write_hints` keeps only cores whose query is unsat within the same budget.
HINT_TRY_MS = 1_000


class Route(Enum):
    """How a preservation obligation was answered."""

    RULE = "rule"  # settled by a syntactic rule (etcdspec.spec.discharge), no Z3
    HINT = "hint"  # the hinted query (a subset of the properties) was unsat
    FALLBACK = "fallback"  # a hint was tried, was not unsat: the full query answered
    STALE = "stale"  # the sidecar's hint no longer matches the spec: the full query answered
    FULL = "full"  # no hint: the full query answered

    def describe(self) -> str:
        return {
            Route.RULE: "by rule",
            Route.HINT: "by hint",
            Route.FALLBACK: "hint fell back to full query",
            Route.STALE: "stale hint ignored, full query",
            Route.FULL: "full query",
        }[self]


@dataclass(frozen=True)
class Hint:
    """The properties the proof of `prop` preserved by `action` uses."""

    prop: str
    action: str
    core: tuple[str, ...]
    fingerprint: str
    rlimit: int  # Z3 work of the hinted query when the hint was written (isolated)

    def describe(self) -> str:
        return (
            f"{self.prop} preserved by {self.action}: {len(self.core)} properties "
            f"({', '.join(self.core)}), rlimit {self.rlimit}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.prop,
            "action": self.action,
            "core": list(self.core),
            "fingerprint": self.fingerprint,
            "rlimit": self.rlimit,
        }


@dataclass(frozen=True)
class Hints:
    """A spec's hints, as read from or written to its sidecar."""

    spec: str
    entries: tuple[Hint, ...]

    def describe(self) -> str:
        return f"hints for {self.spec}: {len(self.entries)} entries ({HINTS_SCHEMA})"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": HINTS_SCHEMA,
            "spec": self.spec,
            "hint_try_ms": HINT_TRY_MS,
            "hints": [h.to_json() for h in self.entries],
        }

    @staticmethod
    def from_json(document: Any, where: str) -> Hints:
        """Parse a sidecar document; SpecLookupError (saying what to do) if malformed."""
        fix = f"regenerate it with etcdspec.spec.hints.write_hints, or delete {where}"
        if not isinstance(document, dict) or document.get("schema") != HINTS_SCHEMA:
            found = document.get("schema") if isinstance(document, dict) else type(document)
            raise SpecLookupError(f"{where}: not a {HINTS_SCHEMA} document (schema {found}); {fix}")
        entries = []
        for number, item in enumerate(document.get("hints", [])):
            try:
                entries.append(
                    Hint(
                        str(item["property"]),
                        str(item["action"]),
                        tuple(str(n) for n in item["core"]),
                        str(item["fingerprint"]),
                        int(item.get("rlimit", 0)),
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise SpecLookupError(
                    f"{where}: hint #{number} is malformed ({error}); {fix}"
                ) from error
        return Hints(str(document.get("spec", "")), tuple(entries))


@dataclass(frozen=True)
class HintBook:
    """The hints that match the spec as loaded: (property, action) -> core; `stale`
    lists the entries whose fingerprint does not match (they are not used)."""

    cores: dict[tuple[str, str], tuple[str, ...]]
    stale: frozenset[tuple[str, str]]

    def route_without(self, prop: str, action: str) -> Route:
        """The route of an obligation answered without a hint."""
        return Route.STALE if (prop, action) in self.stale else Route.FULL


EMPTY_BOOK = HintBook({}, frozenset())


def _digest(parts: Sequence[str]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode())
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def context_text(spec: ast.Spec) -> list[str]:
    """The declarations every query depends on: sorts, symbols, axioms, definitions."""
    return [
        print_decl(d)
        for d in spec.decls
        if isinstance(d, (ast.SortDecl, ast.SymbolDecl, ast.DefineDecl))
        or (isinstance(d, ast.FormulaDecl) and d.kind is ast.FormulaKind.AXIOM)
    ]


class _Texts:
    """The printed declarations of one spec that fingerprints are made of (printed once)."""

    def __init__(self, spec: ast.Spec) -> None:
        self.context = _digest(context_text(spec))
        self.properties = {p.name: print_decl(p) for p in spec.properties()}
        self._actions: dict[str, str] = {}

    def fingerprint(self, action: ast.ActionDecl, prop: str, core: Sequence[str]) -> str:
        if action.name not in self._actions:
            body = "".join(print_stmt(s) for s in action.body)
            self._actions[action.name] = f"action {action.name}({body})"
        action_text = self._actions[action.name]
        core_text = [self.properties.get(n, f"missing {n}") for n in core]
        return _digest(
            [self.context, action_text, self.properties.get(prop, f"missing {prop}"), *core_text]
        )


def fingerprint(
    spec: ast.Spec, action: ast.ActionDecl, prop: ast.FormulaDecl, core: Sequence[str]
) -> str:
    """A digest of the texts a hint depends on (the action's body as it will run, so
    a mutation switched on in this action changes it; the mutation blocks do not)."""
    return _Texts(spec).fingerprint(action, prop.name, core)


def book(hints: Hints | None, spec: ast.Spec) -> HintBook:
    """The usable hints of `hints` for `spec` (fingerprints checked)."""
    if hints is None:
        return EMPTY_BOOK
    texts = _Texts(spec)
    cores: dict[tuple[str, str], tuple[str, ...]] = {}
    stale: set[tuple[str, str]] = set()
    for hint in hints.entries:
        key = (hint.prop, hint.action)
        action = spec.action(hint.action)
        if (
            action is None
            or hint.prop not in texts.properties
            or any(n not in texts.properties for n in hint.core)
            or texts.fingerprint(action, hint.prop, hint.core) != hint.fingerprint
        ):
            stale.add(key)
        else:
            cores[key] = hint.core
    return HintBook(cores, frozenset(stale))


def hints_path(spec_filename: str) -> Path:
    """The sidecar of a spec file: `spec/raft.spec` -> `spec/raft.hints`."""
    path = Path(spec_filename)
    return path.with_name(path.stem + HINTS_SUFFIX)


def render(hints: Hints) -> str:
    """The sidecar's text: JSON, one hint a line (small diffs when a spec changes)."""
    document = hints.to_json()
    entries = document.pop("hints")
    head = json.dumps(document)[:-1]
    lines = ",\n".join("  " + json.dumps(entry) for entry in entries)
    return f'{head}, "hints": [\n{lines}\n]}}\n'


def read_hints(path: Path) -> Hints:
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise SpecLookupError(
            f"{path}: not JSON ({error}); regenerate it with write_hints or delete it"
        ) from error
    return Hints.from_json(document, str(path))


def load_hints(loaded: LoadedSpec) -> Hints | None:
    """The sidecar next to the spec's file, if there is one."""
    path = hints_path(loaded.spec.filename)
    return read_hints(path) if path.is_file() else None


def compute_hints(
    loaded: LoadedSpec,
    rlimit_per_ms: int,
    timeout_ms: int,
    on_hint: Callable[[str], None] | None = None,
) -> Hints:
    """A hint for every preservation query no syntactic rule settles and whose full
    query is unsat within `timeout_ms` of Z3 work: its minimised unsat core, kept if the
    hinted query is unsat within HINT_TRY_MS of Z3 work."""
    from etcdspec.spec.prove import Prover

    instance = Prover(loaded).unbounded
    properties = loaded.spec.properties()
    full = Budget(timeout_ms * 3, timeout_ms * rlimit_per_ms)
    small = Budget(timeout_ms * 3, HINT_TRY_MS * rlimit_per_ms)
    texts = _Texts(loaded.spec)
    entries = []
    for action in loaded.spec.actions():
        step = instance.step(action)
        for prop in properties:
            if settle(loaded.info, action, prop) is not None:
                continue
            fixed = [*instance.axioms, step.guard, step.negation(prop)]
            hypotheses = instance.hypotheses
            core = _core(fixed, hypotheses, full)
            if core is None:
                if on_hint is not None:
                    on_hint(f"no hint: {prop.name} preserved by {action.name} (not unsat)")
                continue
            core, used = _minimise(fixed, hypotheses, core, small)
            if used is None:
                if on_hint is not None:
                    on_hint(f"no hint: {prop.name} preserved by {action.name} (over budget)")
                continue
            ordered = tuple(p.name for p in properties if p.name in core)
            hint = Hint(
                prop.name, action.name, ordered, texts.fingerprint(action, prop.name, ordered), used
            )
            entries.append(hint)
            if on_hint is not None:
                on_hint(hint.describe())
    return Hints(loaded.name, tuple(entries))


def _core(
    fixed: Sequence[z3.BoolRef], hypotheses: dict[str, z3.BoolRef], budget: Budget
) -> list[str] | None:
    """The names of the hypotheses in an unsat core of the query (None: not unsat)."""
    context = z3.Context()
    solver = configure(z3.Solver(ctx=context), budget)
    for assertion in fixed:
        solver.add(assertion.translate(context))
    literals = {}
    for name, formula in hypotheses.items():
        literal = z3.Bool(f"hint!{name}", context)
        literals[str(literal)] = name
        solver.add(z3.Implies(literal, formula.translate(context)))
    if solver.check(*[z3.Bool(f"hint!{n}", context) for n in hypotheses]) != z3.unsat:
        return None
    return [literals[str(x)] for x in solver.unsat_core()]


def subset_answer(
    fixed: Sequence[z3.BoolRef],
    hypotheses: dict[str, z3.BoolRef],
    core: Sequence[str],
    budget: Budget,
) -> int | None:
    """The Z3 work (rlimit) of the query with only `core`'s hypotheses, in a fresh
    context; None if it is not unsat within `budget`."""
    context = z3.Context()
    solver = configure(z3.Solver(ctx=context), budget)
    for assertion in [*fixed, *(hypotheses[n] for n in core)]:
        solver.add(assertion.translate(context))
    if solver.check() != z3.unsat:
        return None
    return int(solver.statistics().get_key_value("rlimit count"))


def _minimise(
    fixed: Sequence[z3.BoolRef],
    hypotheses: dict[str, z3.BoolRef],
    core: list[str],
    budget: Budget,
) -> tuple[list[str], int | None]:
    """Drop each hypothesis of `core` whose removal keeps the query unsat within
    `budget` and does not make it costlier; (the core, its query's rlimit or None)."""
    used = subset_answer(fixed, hypotheses, core, budget)
    if used is None:
        return core, None
    for name in list(core):
        if len(core) == 1:
            break
        trial = [n for n in core if n != name]
        cost = subset_answer(fixed, hypotheses, trial, budget)
        if cost is not None and cost <= used:
            core, used = trial, cost
    return core, used


def write_hints(
    loaded: LoadedSpec,
    path: Path | None = None,
    on_hint: Callable[[str], None] | None = None,
) -> tuple[Path, Hints]:
    """Compute `loaded`'s hints (etcdspec.spec.prove's budgets) and write them to
    `path` (default: the sidecar next to the spec). Returns where and what."""
    from etcdspec.spec.prove import DEFAULT_TIMEOUT_MS, RLIMIT_PER_MS

    if loaded.mutation is not None:
        raise SpecLookupError(
            f"hints are written for the spec as written, not with mutation {loaded.mutation}: "
            "load it without --mutation"
        )
    hints = compute_hints(loaded, RLIMIT_PER_MS, DEFAULT_TIMEOUT_MS, on_hint)
    target = path or hints_path(loaded.spec.filename)
    target.write_text(render(hints))
    return target, hints


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m etcdspec.spec.hints [SPEC...]`: write each spec's sidecar (default:
    the built-in specs), one line per hint on stderr with `--verbose`."""
    import argparse
    import sys

    from etcdspec.spec.loader import BUILTIN_SPECS, load_spec

    parser = argparse.ArgumentParser(description="Write proof hints (unsat cores) next to specs.")
    parser.add_argument("specs", nargs="*", help="built-in names or paths (default: all built-in)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    for name in args.specs or BUILTIN_SPECS:
        report = (lambda line: print("  " + line, file=sys.stderr)) if args.verbose else None
        path, hints = write_hints(load_spec(name), on_hint=report)
        print(f"{path}: {len(hints.entries)} hints")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
