"""How long a new member takes to catch up with a store of 100k keys: etcd's and ours,
by the same harness.

For each target (`--target etcd`, `reference`, or `both`, one after the other) it starts
a 3-member local cluster behind the conformance peer proxies (conform/targets.py), puts
--keys keys of --value-size bytes in Txns of --batch puts from --writers concurrent
clients, then times the membership change the replace-member fault makes: MemberAdd of a
fresh member, started on an empty data dir with `--initial-cluster-state existing`
(LocalCluster.join), until its process first answers Status (start-up), until it names
a leader and has applied the commit index the cluster reported then
(conform/member_faults.py's wait_caught_up), and until a serializable count on it shows
every key; all three from MemberAdd's answer; and the CPU time (user + system, from
/proc) the new member's process had used when it had applied that index, the figure that
holds up on a loaded machine, where wall times mostly measure the wait for a core.
Nothing writes during the catch-up. At
the default --keys and --batch the store is about 1,000 log entries, under the members'
--snapshot-count of 10,000 (launcher's default), so the leader sends them as log entries,
not a snapshot.

A target that refuses MemberAdd (our server, until it serves the Cluster changes) gets
no figure: the script says "target does not serve MemberAdd" and exits 3 (unknown); a
member that does not catch up within --timeout also exits 3. Exit 0 only when every
asked-for target gave its figures.

Usage: python -m bench.member_catchup [--target both] [--keys 100000] [--value-size 100]
       [--batch 100] [--writers 8] [--timeout 300] [--etcd-bin PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from etcdspec.conform.member_faults import FaultUndecided, status_of, wait_caught_up
from etcdspec.conform.member_wire import ClusterClient, ListedMember, MemberCallError, NotServed
from etcdspec.conform.targets import LocalCluster, find_etcd
from etcdspec.exitcodes import ExitCode
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc
from etcdspec.impl.tools import launcher


@dataclass(frozen=True)
class CatchUpFigure:
    """One target's figures, or why it has none."""

    target: str
    keys: int
    fill_s: float = 0.0
    db_size: int = 0
    index: int = 0  # the commit index the new member had to reach
    up_s: float = 0.0  # MemberAdd answered -> the new process first answers Status
    applied_s: float = 0.0  # MemberAdd answered -> that index applied
    all_keys_s: float = 0.0  # MemberAdd answered -> a serializable count shows every key
    cpu_s: float = 0.0  # the new member's CPU time (user + system) when it had applied
    refused: str = ""

    def describe(self) -> str:
        if self.refused:
            return f"{self.target}: no figure, {self.refused}"
        return (
            f"{self.target}: {self.keys} keys ({self.db_size / 1e6:.1f} MB db) filled in "
            f"{self.fill_s:.1f} s; new member answered Status after {self.up_s:.2f} s, "
            f"applied index {self.index} after {self.applied_s:.2f} s, served all keys "
            f"after {self.all_keys_s:.2f} s; its CPU time then {self.cpu_s:.2f} s"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "keys": self.keys,
            "fill_s": round(self.fill_s, 3),
            "db_size": self.db_size,
            "index": self.index,
            "up_s": round(self.up_s, 3),
            "applied_s": round(self.applied_s, 3),
            "all_keys_s": round(self.all_keys_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "refused": self.refused or None,
        }


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` has used (proc(5) stat fields 14, 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fill(url: str, keys: int, value_size: int, batch: int, writers: int) -> None:
    """`keys` puts in Txns of `batch`, from `writers` concurrent clients."""
    value = b"v" * value_size
    batches = [range(start, min(keys, start + batch)) for start in range(0, keys, batch)]

    async def writer(number: int) -> None:
        async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
            stub = rpc_pb2_grpc.KVStub(channel)
            for chunk in batches[number::writers]:
                puts = [
                    rpc_pb2.RequestOp(
                        request_put=rpc_pb2.PutRequest(key=b"key/%08d" % i, value=value)
                    )
                    for i in chunk
                ]
                await stub.Txn(rpc_pb2.TxnRequest(success=puts), timeout=30.0)

    await asyncio.gather(*(writer(n) for n in range(writers)))


async def count_keys(url: str) -> int:
    async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
        answer = await rpc_pb2_grpc.KVStub(channel).Range(
            rpc_pb2.RangeRequest(
                key=b"key/", range_end=b"key0", count_only=True, serializable=True
            ),
            timeout=5.0,
        )
    return int(answer.count)


async def first_answer(url: str, since: float, timeout_s: float) -> float:
    """Seconds from `since` until the member at `url` first answers Status."""
    while time.monotonic() - since < timeout_s:
        try:
            await status_of(url, 0.5)
            return time.monotonic() - since
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.02)
    return timeout_s


async def add_member(url: str, peer_url: str, tries: int = 30) -> ListedMember:
    """MemberAdd, asked again once a second while the cluster answers otherwise than
    UNIMPLEMENTED (etcd refuses a change until its leader has heard from a quorum for
    5 s: "unhealthy cluster" right after a start)."""
    client = ClusterClient(url, 10.0)
    try:
        for attempt in range(tries):
            try:
                added, _ = await client.member_add([peer_url])
                return added
            except NotServed:
                raise
            except MemberCallError:
                if attempt == tries - 1:
                    raise
            await asyncio.sleep(1.0)
    finally:
        await client.close()
    raise AssertionError("unreachable")


async def measure(
    kind: str, program: list[str], directory: Path, args: argparse.Namespace
) -> CatchUpFigure:
    cluster = LocalCluster(kind, program, directory)
    try:
        await cluster.start()
        urls = [cluster.client_url(name) for name in cluster.member_names()]
        started = time.monotonic()
        await fill(urls[0], args.keys, args.value_size, args.batch, args.writers)
        fill_s = time.monotonic() - started
        db_size = int((await status_of(urls[0], 5.0)).dbSize)
        new = cluster.plan_member()
        try:
            added = await add_member(urls[0], cluster.proxied_peer_url(new.name))
        except NotServed as error:
            return CatchUpFigure(kind, args.keys, fill_s, db_size, refused=error.describe())
        except MemberCallError as error:
            return CatchUpFigure(kind, args.keys, fill_s, db_size, refused=f"refused: {error}")
        added_at = time.monotonic()
        await cluster.join(new, added.member_id)
        up_s = await first_answer(new.client_url, added_at, args.timeout)
        try:
            caught = await wait_caught_up(new.client_url, urls, args.timeout, time.monotonic)
        except FaultUndecided as error:
            return CatchUpFigure(kind, args.keys, fill_s, db_size, refused=str(error))
        applied_s = time.monotonic() - added_at
        cpu_s = process_cpu_s(cluster.members[new.name].pid)
        while True:
            try:
                if await count_keys(new.client_url) >= args.keys:
                    break
            except grpc.aio.AioRpcError:
                pass
            if time.monotonic() - added_at > args.timeout:
                return CatchUpFigure(
                    kind, args.keys, fill_s, db_size, refused="not every key served in time"
                )
            await asyncio.sleep(0.05)
        return CatchUpFigure(
            kind,
            args.keys,
            fill_s,
            db_size,
            caught.index,
            up_s,
            applied_s,
            time.monotonic() - added_at,
            cpu_s,
        )
    finally:
        await cluster.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=["etcd", "reference", "both"], default="both")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--etcd-bin", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    kinds = ["etcd", "reference"] if args.target == "both" else [args.target]
    figures = []
    for kind in kinds:
        program = [find_etcd(args.etcd_bin)] if kind == "etcd" else launcher.ours_program()
        with tempfile.TemporaryDirectory(prefix=f"catchup-{kind}-") as directory:
            figure = asyncio.run(measure(kind, program, Path(directory), args))
        print(figure.describe(), file=sys.stderr)
        figures.append(figure)
    if args.json:
        print(json.dumps([f.to_json() for f in figures], indent=2))
    return int(ExitCode.UNKNOWN) if any(f.refused for f in figures) else int(ExitCode.HOLDS)


if __name__ == "__main__":
    sys.exit(main())
