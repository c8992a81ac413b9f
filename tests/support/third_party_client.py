"""One scenario driven through a real third-party etcd client library, as its users write
it: `python third_party_client.py LIBRARY HOST:PORT` prints the transcript as JSON.

LIBRARY is `etcd3` (python-etcd3 0.12, threads and grpc) or `aetcd` (aetcd 1.0, asyncio).
Each library carries its own copy of etcd's protobufs, which collide with ours (and each
other's) in one process's descriptor pool, so each runs in a process of its own; etcd3's
generated code predates protobuf 4 and needs the pure-Python protobuf runtime
(PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, set by the caller).

The scenario: puts and gets, a prefix, compare-and-swap transactions both ways, deletes,
a watch, a lease with a key on it (keys, TTL, revoke), the library's own lock (made of a
lease and a transaction) contended by a second holder, and a request etcd refuses. The
transcript holds what the library returned with every value a fresh store makes the same
on any conforming server (revisions included); lease ids are numbered in order of
appearance, errors are the library's exception class and etcd's message.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

Transcript = list[list[Any]]


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


def _error(error: Exception) -> str:
    details = getattr(error, "details", None)
    message = details() if callable(details) else str(error)
    return f"{type(error).__name__}: {message}"


def run_etcd3(host: str, port: int) -> Transcript:
    import etcd3

    client = etcd3.client(host=host, port=port, timeout=10)
    other = etcd3.client(host=host, port=port, timeout=10)
    out: Transcript = []

    def meta(value: bytes | None, kv: Any) -> Any:
        if value is None:
            return None
        return [_text(value), kv.create_revision, kv.mod_revision, kv.version]

    out.append(["put a", client.put("/tp/a", "1").header.revision])
    out.append(["put b", client.put("/tp/b", "2").header.revision])
    out.append(["get a", meta(*client.get("/tp/a"))])
    out.append(["put a again", client.put("/tp/a", "1b").header.revision])
    out.append(["get a", meta(*client.get("/tp/a"))])
    out.append(
        [
            "prefix",
            [[_text(kv.key), _text(v), kv.mod_revision] for v, kv in client.get_prefix("/tp/")],
        ]
    )
    txn = client.transactions
    ok, responses = client.transaction(
        compare=[txn.value("/tp/b") == "2"], success=[txn.put("/tp/b", "3")], failure=[]
    )
    out.append(["cas b 2->3", ok, [r.response_put.header.revision for r in responses]])
    ok, responses = client.transaction(
        compare=[txn.value("/tp/b") == "2"],
        success=[txn.put("/tp/b", "4")],
        failure=[txn.get("/tp/b")],
    )
    out.append(["cas b 2->4", ok, [[meta(v, kv) for v, kv in r] for r in responses]])
    out.append(["delete a", client.delete("/tp/a")])
    out.append(["get a", meta(*client.get("/tp/a"))])
    out.append(["delete missing", client.delete("/tp/none")])

    events: list[Any] = []
    seen = threading.Event()

    def on_watch(response: Any) -> None:
        events.extend(response.events)
        seen.set()

    watch_id = client.add_watch_callback("/tp/w", on_watch)
    client.put("/tp/w", "x")
    out.append(["watch event arrived", seen.wait(10)])
    out.append(
        [
            "watch",
            [[type(e).__name__, _text(e.key), _text(e.value), e.mod_revision] for e in events],
        ]
    )
    client.cancel_watch(watch_id)

    lease = client.lease(30)
    out.append(["lease ttl", lease.granted_ttl])
    client.put("/tp/l", "leased", lease=lease)
    out.append(["lease keys", [_text(k) for k in lease.keys]])
    out.append(["leased key's lease is L1", client.get("/tp/l")[1].lease_id == lease.id])
    lease.revoke()
    out.append(["leased key after revoke", meta(*client.get("/tp/l"))])
    out.append(["ttl after revoke", lease.remaining_ttl])

    first = client.lock("tp-lock", ttl=10)
    second = other.lock("tp-lock", ttl=10)
    out.append(["lock 1 acquire", first.acquire(timeout=5)])
    out.append(["lock 2 acquire while held", second.acquire(timeout=1)])
    out.append(["lock 1 release", first.release()])
    out.append(["lock 2 acquire", second.acquire(timeout=5)])
    out.append(["lock 2 release", second.release()])

    try:
        client.transaction(
            compare=[], success=[txn.put("/tp/d", "1"), txn.put("/tp/d", "2")], failure=[]
        )
        out.append(["duplicate key txn", "accepted"])
    except Exception as error:
        out.append(["duplicate key txn", _error(error)])
    client.close()
    other.close()
    return out


async def _run_aetcd(host: str, port: int) -> Transcript:
    import aetcd

    client = aetcd.Client(host=host, port=port, timeout=10)
    other = aetcd.Client(host=host, port=port, timeout=10)
    out: Transcript = []

    def meta(kv: Any) -> Any:
        if kv is None:
            return None
        return [_text(kv.value), kv.create_revision, kv.mod_revision, kv.version]

    out.append(["put a", (await client.put(b"/tp/a", b"1")).header.revision])
    out.append(["put b", (await client.put(b"/tp/b", b"2")).header.revision])
    out.append(["get a", meta(await client.get(b"/tp/a"))])
    out.append(["put a again", (await client.put(b"/tp/a", b"1b")).header.revision])
    out.append(["get a", meta(await client.get(b"/tp/a"))])
    prefix = await client.get_prefix(b"/tp/")
    out.append(["prefix", [[_text(kv.key), _text(kv.value), kv.mod_revision] for kv in prefix]])
    txn = client.transactions
    ok, responses = await client.transaction(
        compare=[txn.value(b"/tp/b") == b"2"], success=[txn.put(b"/tp/b", b"3")], failure=[]
    )
    out.append(["cas b 2->3", ok, [r.response_put.header.revision for r in responses]])
    ok, responses = await client.transaction(
        compare=[txn.value(b"/tp/b") == b"2"],
        success=[txn.put(b"/tp/b", b"4")],
        failure=[txn.get(b"/tp/b")],
    )
    out.append(["cas b 2->4", ok, [[meta(kv) for _, kv in r] for r in responses]])
    out.append(["delete a", await client.delete(b"/tp/a") is not None])
    out.append(["get a", meta(await client.get(b"/tp/a"))])
    # aetcd answers None where nothing was deleted.
    out.append(["delete missing", await client.delete(b"/tp/none") is not None])

    watch = await client.watch(b"/tp/w")
    await client.put(b"/tp/w", b"x")
    events: list[Any] = []

    async def first_event() -> None:
        async for event in watch:
            events.append(event)
            return

    try:
        await asyncio.wait_for(first_event(), 10)
        out.append(["watch event arrived", True])
    except TimeoutError:
        out.append(["watch event arrived", False])
    out.append(
        [
            "watch",
            [
                [
                    {"PUT": "PutEvent", "DELETE": "DeleteEvent"}[e.kind],
                    _text(e.kv.key),
                    _text(e.kv.value),
                    e.kv.mod_revision,
                ]
                for e in events
            ],
        ]
    )
    await watch.cancel()

    lease = await client.lease(30)
    out.append(["lease ttl", lease.ttl])
    await client.put(b"/tp/l", b"leased", lease=lease)
    out.append(["lease keys", [_text(k) for k in await lease.keys()]])
    out.append(["leased key's lease is L1", (await client.get(b"/tp/l")).lease == lease.id])
    await lease.revoke()
    out.append(["leased key after revoke", meta(await client.get(b"/tp/l"))])
    out.append(["ttl after revoke", await lease.remaining_ttl()])

    first = client.lock(b"tp-lock", ttl=10)
    second = other.lock(b"tp-lock", ttl=10)
    out.append(["lock 1 acquire", await _acquired(first, 5)])
    out.append(["lock 2 acquire while held", await _acquired(second, 1)])
    out.append(["lock 1 release", await first.release()])
    out.append(["lock 2 acquire", await _acquired(second, 5)])
    out.append(["lock 2 release", await second.release()])

    try:
        await client.transaction(
            compare=[], success=[txn.put(b"/tp/d", b"1"), txn.put(b"/tp/d", b"2")], failure=[]
        )
        out.append(["duplicate key txn", "accepted"])
    except Exception as error:
        out.append(["duplicate key txn", _error(error)])
    await client.close()
    await other.close()
    return out


async def _acquired(lock: Any, timeout: int) -> bool:
    """aetcd's acquire raises on timeout where etcd3's answers False."""
    import aetcd

    try:
        await lock.acquire(timeout=timeout)
    except aetcd.exceptions.ClientError:
        return False
    return bool(await lock.is_acquired())


def main(argv: list[str]) -> int:
    library, address = argv
    host, _, port = address.rpartition(":")
    if library == "etcd3":
        transcript = run_etcd3(host, int(port))
    elif library == "aetcd":
        transcript = asyncio.run(_run_aetcd(host, int(port)))
    else:
        print(f"unknown library {library!r}: etcd3 or aetcd", file=sys.stderr)
        return 2
    print(json.dumps(transcript))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
