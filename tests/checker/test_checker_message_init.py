"""The store model's messages (etcdspec.model.requests) are built by an `__init__` that
sets each slot through its descriptor (the checker builds hundreds of thousands of
them): it must take what the dataclass's own `__init__` takes and build what it built."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import MISSING
from typing import Any

import pytest

from etcdspec.model import requests

MESSAGES = [
    value
    for value in vars(requests).values()
    if isinstance(value, type)
    and value.__module__ == requests.__name__
    and dataclasses.is_dataclass(value)
]


def _reference(cls: type) -> type:
    """The same fields as a plain frozen dataclass, with the dataclass's own __init__."""
    fields = [
        (f.name, Any, dataclasses.field(default=f.default))
        if f.default is not MISSING
        else (f.name, Any)
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(f"Reference{cls.__name__}", fields, frozen=True)


def test_every_message_has_the_direct_init() -> None:
    assert len(MESSAGES) >= 25
    for cls in MESSAGES:
        assert cls.__init__.__code__.co_filename == f"<fast init {cls.__name__}>"


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda cls: cls.__name__)
def test_the_signature_and_the_fields_are_the_dataclass_s(cls: type) -> None:
    reference = _reference(cls)
    ours, theirs = inspect.signature(cls), inspect.signature(reference)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]
    assert cls.__init__.__annotations__ == {  # what get_type_hints reads
        **{f.name: f.type for f in dataclasses.fields(cls)},
        "return": None,
    }
    # Only the defaults: every field at its default (required ones from the reference).
    required = [p.name for p in ours.parameters.values() if p.default is inspect.Parameter.empty]
    if not required:
        made = cls()
        assert dataclasses.astuple(made) == dataclasses.astuple(reference())
        assert made == pickle.loads(pickle.dumps(made)) and hash(made) == hash(cls())


def test_built_messages_keep_their_checks_and_stay_frozen() -> None:
    kv = requests.KeyValue(b"a", 2, 3, 1, b"v", 7)
    assert (kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease) == (
        b"a",
        2,
        3,
        1,
        b"v",
        7,
    )
    assert kv == requests.KeyValue(
        key=b"a", create_revision=2, mod_revision=3, version=1, value=b"v", lease=7
    )
    assert dataclasses.replace(kv, version=2).version == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        kv.key = b"b"  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"PutRequest\.key must be bytes"):
        requests.PutRequest("a", b"v")  # type: ignore[arg-type]  # __post_init__ still runs
    with pytest.raises(TypeError, match="missing 3 required positional arguments"):
        requests.KeyValue(b"a")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        requests.ResponseHeader(revision=1, term=2)  # type: ignore[call-arg]
