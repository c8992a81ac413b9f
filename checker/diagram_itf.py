"""ITF counterexamples → `Diagram`: our model's, our BMC's, and Apalache's or Quint's.

Contract
- `diagram_from_itf(document, invariant="")` reads one ITF document (the parsed JSON) and
  recognises, in this order:
  1. the cluster model (`etcdspec explore`): variable `nodes` maps node → record with
     `role`, `term`, `log`; `messages` is the multiset in flight ("n1→n2 …" → count);
  2. the store model: variables `kvs` and `revision`; drawn as a client and the store;
  3. the spec (`etcdspec prove --bmc`): relation `current_term(node, term)`, with
     `voted`, `leader`, `log(node, index, term)` and message relations `*_msg`;
  4. Raft as TLA+/Quint write it: a function from node to term (`currentTerm`,
     `current_term`), optionally `state`/`role`, `log`, `commitIndex`, `votedFor`, and
     `messages` as a bag (record → count) or a set of records whose endpoints are
     `msource`/`mdest`, `from`/`to` or `src`/`dst`.
  Anything else is drawn without lifelines: each step's variables as text, and a note
  naming the variables that were looked for.
- The violated invariant: `invariant` when given, else read from the description
  ("violates X", "X fail(s) in the last state"), else unnamed; it is marked at the last
  state, where ITF counterexamples end. The action of a step is `#meta.action`, else
  Quint's `mbt::actionTaken`, else "step N".
- Bad input raises `DiagramInputError` saying what is wrong and what to give instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from etcdspec.checker.diagram import Diagram, Message, MessageBag, NodeState, build_steps
from etcdspec.itf import NONE_VALUE


class DiagramInputError(ValueError):
    """An input file that cannot be drawn; the message says why and what to give."""


def load_itf(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DiagramInputError(f"{path}: not a readable ITF JSON file ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("states"), list):
        raise DiagramInputError(
            f"{path}: an ITF document is an object with a 'states' list; "
            "give a .itf.json file (etcdspec explore --itf, prove --itf, Apalache, Quint)"
        )
    return document


def decode(value: Any) -> Any:
    """An ITF value as plain Python: #tup → tuple, #set → list, #map → dict (or a list of
    pairs when a key is not hashable), #bigint → int, the empty option → None, records →
    dict."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value == NONE_VALUE:  # how etcdspec writes None (ITF has no null)
        return None
    if "#tup" in value:
        return tuple(_hashable(decode(v)) for v in value["#tup"])
    if "#set" in value:
        return [decode(v) for v in value["#set"]]
    if "#bigint" in value:
        return int(value["#bigint"])
    if "#map" in value:
        pairs = [(decode(k), decode(v)) for k, v in value["#map"]]
        try:
            return {_hashable(k): v for k, v in pairs}
        except TypeError:
            return pairs
    return {k: decode(v) for k, v in value.items() if k != "#meta"}


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def text(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(text(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{text(k)}: {text(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "none"
    return str(value)


def _label(state: Mapping[str, Any], number: int) -> str:
    meta = state.get("#meta", {})
    if isinstance(meta, dict) and meta.get("action"):
        return str(meta["action"])
    taken = state.get("mbt::actionTaken")
    return str(taken) if taken else ("" if number == 0 else f"step {number}")


def _invariant(document: Mapping[str, Any], given: str) -> str:
    if given:
        return given
    description = str(document.get("#meta", {}).get("description", ""))
    found = re.search(r"violates (\w+)", description) or re.search(
        r"(\w+) fail\(s\) in the last state", description
    )
    return found.group(1) if found else ""


def diagram_from_itf(document: Mapping[str, Any], invariant: str = "") -> Diagram:
    """See the module docstring."""
    raw_states = document.get("states")
    if not isinstance(raw_states, list) or not raw_states:
        raise DiagramInputError("the ITF document has no states; a counterexample has at least one")
    states = [{k: decode(v) for k, v in s.items() if k != "#meta"} for s in raw_states]
    labels = [_label(s, i) for i, s in enumerate(raw_states)]
    meta = document.get("#meta", {})
    source = str(meta.get("source", "")) if isinstance(meta, dict) else ""
    name = _invariant(document, invariant)
    title = f"{name} violated" if name else "counterexample"
    title += f" — {source}" if source else ""
    first = states[0]
    if _is_cluster_model(first):
        return _cluster_model(states, labels, name, title)
    if {"kvs", "revision"} <= first.keys():
        return _store_model(states, labels, name, title)
    if _relation_nodes(first.get("current_term")):
        return _spec_relations(states, labels, name, title)
    functions = _tla_variables(first)
    if functions is not None:
        return _tla_raft(states, labels, name, title, functions)
    return _unrecognised(states, labels, name, title)


def _violation(name: str, last: int) -> tuple[int, str]:
    return (last, name or "(the ITF does not name the property)")


def _actor(label: str, nodes: Sequence[str]) -> str | None:
    """The node a step acts on: a delivery's receiver, else the first node named."""
    found = re.match(r"deliver\((\S+?)→(\S+?) ", label)
    if found and found.group(2) in nodes:
        return found.group(2)
    for token in re.findall(r"[\w@-]+", label):
        if token in nodes:
            return token
    return None


# ---------------------------------------------------------------------- the cluster model


def _is_cluster_model(state: Mapping[str, Any]) -> bool:
    nodes = state.get("nodes")
    return (
        isinstance(nodes, dict)
        and bool(nodes)
        and all(isinstance(v, dict) and {"role", "term", "log"} <= v.keys() for v in nodes.values())
    )


def _cluster_model(
    states: list[dict[str, Any]], labels: list[str], name: str, title: str
) -> Diagram:
    lifelines = tuple(sorted(states[0]["nodes"]))

    def endpoints(key: str) -> tuple[str, str | None]:
        found = re.match(r"(\S+?)→(\S+?) ", key)
        return (found.group(1), found.group(2)) if found else ("?", None)

    bag = MessageBag(endpoints, lambda label, key: label == f"deliver({key})")
    node_states = []
    for number, (state, label) in enumerate(zip(states, labels, strict=True)):
        bag.step(number, label, state.get("messages") or {})
        node_states.append(
            {
                node: NodeState(
                    role=str(record.get("role", "")),
                    term=record.get("term"),
                    vote=text(record["voted_for"]) if record.get("voted_for") else "",
                    log=tuple(str(entry) for entry in record.get("log", [])),
                    commit=record.get("commit_index"),
                    up=bool(record.get("up", True)),
                )
                for node, record in sorted(state["nodes"].items())
            }
        )
    actors = [_actor(label, lifelines) for label in labels]
    steps = build_steps(labels, actors, node_states, _violation(name, len(states) - 1))
    return Diagram(title, "model ITF", lifelines, steps, bag.messages(), name)


# ------------------------------------------------------------------------ the store model


def _store_model(states: list[dict[str, Any]], labels: list[str], name: str, title: str) -> Diagram:
    lifelines = ("client", "store")
    node_states = []
    messages = []
    for number, (state, label) in enumerate(zip(states, labels, strict=True)):
        kvs = state.get("kvs") or {}
        store = NodeState(
            role=f"rev {state.get('revision')}, compacted {state.get('compact_revision', 0)}",
            log=tuple(f"{key}={value}" for key, value in sorted(kvs.items())),
        )
        node_states.append({"client": NodeState(role="client"), "store": store})
        if number and label:
            request, _, response = label.partition(" -> ")
            messages.append(Message(request, "client", "store", number, "delivered", number))
            if response:
                messages.append(Message(response, "store", "client", number, "delivered", number))
    actors = ["store" if i else None for i in range(len(states))]
    steps = build_steps(labels, actors, node_states, _violation(name, len(states) - 1))
    return Diagram(title, "model ITF (store)", lifelines, steps, tuple(messages), name)


# --------------------------------------------------------------- the spec (prove --bmc)


def _relation_nodes(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        return []
    if not all(isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], str) for t in value):
        return []
    return sorted({t[0] for t in value})


def _params(label: str) -> dict[str, str]:
    inside = label[label.find("(") + 1 : label.rfind(")")] if "(" in label else ""
    pairs = (part.split("=", 1) for part in inside.split(", ") if "=" in part)
    return {k.strip(): v.strip() for k, v in pairs}


def _spec_relations(
    states: list[dict[str, Any]], labels: list[str], name: str, title: str
) -> Diagram:
    lifelines = tuple(_relation_nodes(states[0]["current_term"]))
    nodes = set(lifelines)
    node_states = []
    messages: list[Message] = []
    seen: set[tuple[str, Any]] = set()
    actors: list[str | None] = []
    for number, (state, label) in enumerate(zip(states, labels, strict=True)):
        params = _params(label)
        node_params = [v for v in params.values() if v in nodes]
        actor = params.get("n") if params.get("n") in nodes else next(iter(node_params), None)
        actors.append(actor)
        terms = {n: max((t for m, t in state["current_term"] if m == n), default=0) for n in nodes}
        voted = {(t[0], t[1]): t[2] for t in state.get("voted", []) if len(t) == 3}
        leaders = {tuple(t) for t in state.get("leader", [])}
        values = state.get("value_at") if isinstance(state.get("value_at"), dict) else {}
        snapshot = {}
        for n in lifelines:
            vote = voted.get((n, terms[n]), "")
            role = (
                "leader" if (n, terms[n]) in leaders else "candidate" if vote == n else "follower"
            )
            entries = sorted((t[1], t[2]) for t in state.get("log", []) if t[0] == n)
            log = tuple(
                f"{term}:{values.get((index, term), '')}" if values else str(term)
                for index, term in entries
            )
            snapshot[n] = NodeState(role=role, term=terms[n], vote=str(vote), log=log)
        node_states.append(snapshot)
        for var in sorted(k for k in state if k.endswith("_msg")):
            for item in state[var]:
                if (var, item) in seen:
                    continue
                seen.add((var, item))
                members = item if isinstance(item, tuple) else (item,)
                in_it = [m for m in members if m in nodes]
                sender = in_it[0] if in_it else (actor or "?")
                receiver = in_it[1] if len(in_it) > 1 else None
                if receiver == sender:  # a node's own vote for itself: nothing on the wire
                    continue
                label_text = f"{var.removesuffix('_msg')}{text(members)}"
                messages.append(Message(label_text, sender, receiver, number, "in flight"))
        if label.startswith("receive_") and actor is not None:
            peers = [v for k, v in params.items() if v in nodes and k != "n"]
            kind = label[len("receive_") : label.find("(")]
            candidates = [
                m
                for m in messages
                if m.label.startswith(kind)
                and m.receiver in (None, actor)
                and m.sender != actor
                and (not peers or m.sender == peers[0])
            ]
            sender = candidates[-1].sender if candidates else (peers[0] if peers else "?")
            sent = candidates[-1].sent if candidates else number
            messages.append(Message(label, sender, actor, sent, "delivered", number))
    steps = build_steps(labels, actors, node_states, _violation(name, len(states) - 1))
    return Diagram(title, "spec ITF (BMC)", lifelines, steps, tuple(messages), name)


# ------------------------------------------------------------------ TLA+ / Quint Raft

_NAMES = {
    "term": ("currentterm", "current_term", "term"),
    "role": ("state", "role", "serverstate"),
    "log": ("log",),
    "commit": ("commitindex", "commit_index"),
    "vote": ("votedfor", "voted_for"),
    "messages": ("messages", "msgs", "network"),
}
_ENDPOINTS = (("msource", "mdest"), ("from", "to"), ("src", "dst"), ("sender", "receiver"))


def _tla_variables(state: Mapping[str, Any]) -> dict[str, str] | None:
    # Quint qualifies a variable by its module path (`buggy::votes::currentTerm`): the
    # name after the last `::` is the variable's own.
    by_name = {k.rsplit("::", 1)[-1].lower(): k for k in state}
    found = {
        role: next((by_name[n] for n in names if n in by_name), "")
        for role, names in _NAMES.items()
    }
    term = state.get(found["term"]) if found["term"] else None
    if not isinstance(term, dict) or not term or not all(isinstance(v, int) for v in term.values()):
        return None
    return found


def _tla_raft(
    states: list[dict[str, Any]],
    labels: list[str],
    name: str,
    title: str,
    var: dict[str, str],
) -> Diagram:
    lifelines = tuple(sorted(text(k) for k in states[0][var["term"]]))

    def per_node(state: Mapping[str, Any], role: str) -> dict[str, Any]:
        value = state.get(var[role]) if var[role] else None
        return {text(k): v for k, v in value.items()} if isinstance(value, dict) else {}

    def endpoints(key: str) -> tuple[str, str | None]:
        record = dict(json.loads(key))
        for source, dest in _ENDPOINTS:
            if source in record:
                return text(record[source]), text(record[dest]) if dest in record else None
        return "?", None

    def delivers(label: str, key: str) -> bool:
        return any(word in label.lower() for word in ("receive", "handle", "deliver", "recv"))

    bag = MessageBag(endpoints, delivers)
    node_states = []
    for number, (state, label) in enumerate(zip(states, labels, strict=True)):
        raw = state.get(var["messages"]) if var["messages"] else None
        if isinstance(raw, dict):
            counts = {
                json.dumps(sorted(dict(k).items()) if isinstance(k, tuple) else k, default=str): v
                for k, v in raw.items()
            }
        elif isinstance(raw, list):
            counts = {
                json.dumps(sorted(m.items()), default=str): 1 for m in raw if isinstance(m, dict)
            }
        else:
            counts = {}
        bag.step(number, label, {k: v for k, v in counts.items() if isinstance(v, int)})
        terms, roles, logs = (
            per_node(state, "term"),
            per_node(state, "role"),
            per_node(state, "log"),
        )
        commits, votes = per_node(state, "commit"), per_node(state, "vote")
        node_states.append(
            {
                n: NodeState(
                    role=text(roles.get(n, "")).lower(),
                    term=terms.get(n),
                    vote=text(votes[n]) if votes.get(n) not in (None, "", "Nil") else "",
                    log=tuple(_entry_text(e) for e in logs.get(n, [])),
                    commit=commits.get(n),
                )
                for n in lifelines
            }
        )
    actors = [_actor(label, lifelines) for label in labels]
    steps = build_steps(labels, actors, node_states, _violation(name, len(states) - 1))
    messages = tuple(replace(m, label=_record_label(m.label)) for m in bag.messages())
    return Diagram(title, "ITF (TLA+/Quint Raft)", lifelines, steps, messages, name)


_KIND_FIELDS = ("mtype", "type", "kind", "tag")


def _record_label(key: str) -> str:
    """A message record as a label: its kind, then its other fields but the endpoints
    (which the arrow shows): `RequestVote term 1`."""
    try:
        record = dict(json.loads(key))
    except (ValueError, TypeError):
        return key
    ends = {name for pair in _ENDPOINTS for name in pair}
    kind = next((text(record[f]) for f in _KIND_FIELDS if f in record), "")
    rest = [
        f"{k.removeprefix('m')} {text(v)}" if k.startswith("m") and k != "m" else f"{k} {text(v)}"
        for k, v in sorted(record.items())
        if k not in ends and k not in _KIND_FIELDS
    ]
    return " ".join([kind, *rest]).strip() or key


def _entry_text(entry: Any) -> str:
    if isinstance(entry, dict) and "term" in entry:
        rest = [text(v) for k, v in entry.items() if k != "term"]
        return f"{entry['term']}:{','.join(rest)}" if rest else str(entry["term"])
    return text(entry)


# ------------------------------------------------------------------------- unrecognised


def _unrecognised(
    states: list[dict[str, Any]], labels: list[str], name: str, title: str
) -> Diagram:
    note = (
        f"variables {', '.join(sorted(states[0])) or '(none)'} are not recognised as a Raft "
        "cluster's (looked for: our model's `nodes`, the spec's `current_term` relation, or "
        "a node → term function `currentTerm` with `state`, `log`, `messages`); drawn as the "
        "steps with each state's variables"
    )
    last = len(states) - 1
    steps = build_steps(labels, [None] * len(states), [{} for _ in states], _violation(name, last))
    with_raw = tuple(
        type(step)(
            step.number,
            step.label,
            None,
            {},
            step.notes,
            step.violation,
            {k: text(v) for k, v in sorted(state.items())},
        )
        for step, state in zip(steps, states, strict=True)
    )
    return Diagram(title, "ITF (unrecognised)", (), with_raw, (), name, False, (note,))
