"""Rule sets of the Hypothesis machines: list a machine's rules, focus it on some of them.

`rule_names(machine)` lists the names `ExploreOptions.rules` may name for a machine
class; `focused(machine, rules)` returns a subclass in which every other rule attribute
is blanked, so that Hypothesis never draws those rules (None: the machine unchanged).
Initialize rules are not rules here: a focused machine keeps them unless `drop` names
them; `has_initialize_rules` tells whether a machine has any left. Shared by the cluster and store machines and by refinement-checked exploration.
"""

from __future__ import annotations

from functools import cache
from typing import Any


def rule_names(machine: type[Any]) -> list[str]:
    """The names of a machine's rules (what `ExploreOptions.rules` may name)."""
    return sorted(
        name
        for name in dir(machine)
        if hasattr(getattr(machine, name, None), "hypothesis_stateful_rule")
    )


@cache
def has_initialize_rules(machine: type[Any]) -> bool:
    """Whether Hypothesis runs an initialize rule first in each example of `machine`.
    Without one it checks the invariants once before the first rule, so a machine that
    counts rule steps in an invariant must not count that first check."""
    return any(
        hasattr(getattr(machine, name, None), "hypothesis_stateful_initialize_rule")
        for name in dir(machine)
    )


def focused(
    machine: type[Any], rules: frozenset[str] | None, drop: frozenset[str] = frozenset()
) -> type[Any]:
    """The machine with only `rules` (None: all) and without the attributes in `drop`
    (e.g. an initialize rule): a subclass whose other rule attributes are blanked."""
    if rules is None and not drop:
        return machine
    known = rule_names(machine)
    if rules is not None:
        unknown = sorted(rules - set(known))
        if unknown:
            raise ValueError(f"unknown rule(s) {', '.join(unknown)}; rules: {', '.join(known)}")
    blanked: dict[str, Any] = {
        name: None for name in known if rules is not None and name not in rules
    }
    blanked.update(dict.fromkeys(drop))
    return type(f"Focused{machine.__name__}", (machine,), blanked)
