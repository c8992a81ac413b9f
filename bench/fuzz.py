"""Fuzzing: Hypothesis-generated and mutated inputs against the parts that read what
others wrote, counting crashes and hangs.

Targets (`TARGETS`; bench/fuzz_grpc.py adds the server's gRPC surface):
- `history`: JSON Lines histories (checker/history.py), the test corpus mutated and
  arbitrary text. Allowed: HistoryError naming the source (and a line).
- `edn`: Jepsen EDN histories (checker/edn.py, checker/jepsen.py) for the register and
  kv models. Allowed: EdnError (line:column), HistoryError.
- `spec`: spec texts (spec/parser.py + spec/typecheck.py): windows of the built-in specs
  mutated, and arbitrary text. Allowed: SpecErrors, every issue at file:line:col.
- `wal`: WAL segments (impl/storage/wal.py) written by Wal itself, one segment mutated.
  Allowed: WalError naming the segment file; a WAL that opens must give the state
  written (or, with a warning naming the torn tail, a prefix of its entries) — anything
  else is a silent wrong result.
- `snapfile`: our snapshot files (impl/storage/snapfile.py). Allowed: SnapshotFileError
  naming the file; a mutated file that decodes is a silent wrong result.
- `etcd-snapshot`: etcd's bbolt snapshots (impl/tools/etcd_snapshot.py, what `snapshot
  status/restore` read), with and without etcdctl's trailing SHA-256. Allowed:
  EtcdSnapshotError / SnapshotError naming the file. bbolt has no checksum over its
  data pages, so a body without the SHA-256 that still reads is not judged (etcd reads
  it too); one with the SHA-256 that reads after a mutation is a silent wrong result.

A finding is an exception not allowed, a silent wrong result, or a hang (one input over
`HANG_S`, interrupted by SIGALRM). Findings are counted, the run goes on; the first few
are printed with their input. Inputs come from Hypothesis's generate phase only (no
shrinking, no database), seeded, so a run replays from its seed.

Usage: python -m bench.fuzz TARGET|all [--inputs 100000] [--seed 0]
Exit code: 0 no finding, 1 findings, 3 fewer inputs ran than asked (unknown).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import logging
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 5.0  # one input taking longer than this is a hang
SHOWN = 5  # findings printed in full
CHUNK = 5000  # inputs per Hypothesis engine


class FuzzFinding(Exception):
    """What a target must not do with an input (a silent wrong result, an error that
    does not say where); raised by a target's check, counted by the run."""


class FuzzHang(BaseException):
    """One input ran past HANG_S (raised from SIGALRM; a BaseException so that no
    `except Exception` in the code under test swallows it)."""


@dataclass
class FuzzTarget:
    """One fuzz target: a strategy of inputs, a check of one input (raises on a finding;
    returns True for an input refused with an allowed error, False for one accepted), a
    health check after each batch (a hang of a server: raises FuzzFinding), and what to
    close at the end."""

    name: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Any], bool]
    health: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None
    batch: int = 1000


@dataclass
class FuzzResult:
    target: str
    asked: int
    inputs: int = 0
    refused: int = 0
    findings: list[str] = field(default_factory=list)
    hangs: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds > 0 else 0.0

    @property
    def exit_code(self) -> int:
        if self.findings:
            return 1
        return 0 if self.inputs >= self.asked else 3

    def describe(self) -> str:
        verdict = {0: "no finding", 1: "FINDINGS", 3: "unknown (fewer inputs than asked)"}
        return (
            f"{self.target}: {self.inputs} inputs ({self.refused} refused) in "
            f"{self.seconds:.1f} s, {self.rate:.0f}/s; {len(self.findings)} findings "
            f"({self.hangs} hangs): {verdict[self.exit_code]}"
        )


@contextmanager
def hang_alarm(seconds: float) -> Iterator[None]:
    def ring(signum: int, frame: object) -> None:
        raise FuzzHang(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(
    target: FuzzTarget, inputs: int, seed: int = 0, hang_s: float = HANG_S, chunk: int = CHUNK
) -> FuzzResult:
    """`inputs` inputs of `target`'s strategy, each checked; findings counted. Hypothesis
    runs `chunk` inputs at a time, seeds seed, seed+1, ...: one engine's record of what it
    generated grew to 2 GB over 100k inputs."""
    result = FuzzResult(target.name, inputs)
    logging.disable(logging.WARNING)  # the readers' warnings (a torn WAL tail) are expected

    def one(value: Any) -> None:
        result.inputs += 1
        try:
            with hang_alarm(hang_s):
                if target.check(value):
                    result.refused += 1
        except FuzzHang as hang:
            result.hangs += 1
            result.findings.append(f"hang: {hang}; input {value!r:.300}")
        except FuzzFinding as finding:
            result.findings.append(f"{finding}; input {value!r:.300}")
        except Exception:
            result.findings.append(f"{traceback.format_exc(limit=-4)}input {value!r:.300}")
        if result.inputs % target.batch == 0:
            # The history reader pauses the cyclic collector and ages what survives
            # (checker/gc_pause.py), made for one history a process: over thousands of
            # inputs the cycles of its refusals (tracebacks) piled up to 2 GB uncollected.
            gc.collect()
            try:
                target.health()
            except FuzzFinding as finding:
                result.hangs += 1
                result.findings.append(f"after {result.inputs} inputs: {finding}")

    started = time.perf_counter()
    try:
        for number in range(0, (inputs + chunk - 1) // chunk):
            body = settings(
                max_examples=min(chunk, inputs - result.inputs),
                database=None,
                deadline=None,
                phases=(Phase.generate,),
                suppress_health_check=list(HealthCheck),
            )(hypothesis_seed(seed * 1_000_003 + number)(given(target.strategy)(one)))
            before = result.inputs
            body()
            elapsed = time.perf_counter() - started
            print(
                f"  {target.name}: {result.inputs} inputs, {len(result.findings)} findings, "
                f"{result.inputs / elapsed:.0f}/s",
                file=sys.stderr,
                flush=True,
            )
            if result.inputs == before:
                break  # the strategy has nothing new to give
        target.health()
    except FuzzFinding as finding:
        result.findings.append(f"at the end: {finding}")
    finally:
        result.seconds = time.perf_counter() - started
        logging.disable(logging.NOTSET)
        target.close()
    return result


# ---- inputs --------------------------------------------------------------------------
INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x22, 0x7B, 0x7D)


def mutate(data: bytes, rng: random.Random, most: int = 4) -> bytes:
    """`data` with 1..`most` mutations: a bit flipped, a byte set, the tail cut off, a
    span deleted, bytes inserted, a span copied elsewhere."""
    out = bytearray(data)
    for _ in range(rng.randint(1, most)):
        kind = rng.choice(("flip", "set", "cut", "delete", "insert", "copy"))
        at = rng.randrange(len(out)) if out else 0
        if kind == "flip" and out:
            out[at] ^= 1 << rng.randrange(8)
        elif kind == "set" and out:
            out[at] = rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randrange(256)
        elif kind == "cut":
            del out[at:]
        elif kind == "delete":
            del out[at : at + rng.randint(1, 16)]
        elif kind == "insert":
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == "copy" and out:
            span = bytes(out[at : at + rng.randint(1, 32)])
            to = rng.randint(0, len(out))
            out[to:to] = span
    return bytes(out)


def mutated(corpus: Sequence[bytes], most: int = 4) -> st.SearchStrategy[bytes]:
    """One corpus item (chosen by Hypothesis) mutated by `mutate` from a seed Hypothesis
    draws: two draws an input, where a draw per mutation step cost 5x the time (the
    readers are fast; Hypothesis's per-draw work was the run's cost)."""
    return st.builds(
        lambda item, seed: mutate(item, random.Random(seed), most),
        st.sampled_from(corpus),
        st.integers(0, 2**64 - 1),
    )


def mutated_text(corpus: Sequence[str]) -> st.SearchStrategy[str]:
    """Corpus texts mutated as UTF-8 bytes (read back with replacement characters), and
    arbitrary text."""
    encoded = [text.encode() for text in corpus]
    return st.one_of(
        mutated(encoded).map(lambda data: data.decode("utf-8", errors="replace")),
        st.text(max_size=200),
    )


def _data_files(suffix: str, most_bytes: int = 8000) -> list[str]:
    folder = ROOT / "tests" / "checker" / "data"
    texts = [p.read_text() for p in sorted(folder.glob(f"*{suffix}"))]
    return [t for t in texts if len(t) <= most_bytes]


def _named(error: BaseException, name: str) -> None:
    if name not in str(error):
        raise FuzzFinding(f"{type(error).__name__} does not name {name}: {error}")


# ---- reader targets ------------------------------------------------------------------
def history_target() -> FuzzTarget:
    from etcdspec.checker.history import HistoryError, parse_history_text

    def check(text: str) -> bool:
        try:
            parse_history_text(text, "fuzz.jsonl")
        except HistoryError as error:
            _named(error, "fuzz.jsonl")
            return True
        return False

    return FuzzTarget("history", mutated_text(_data_files(".jsonl")), check)


def edn_target() -> FuzzTarget:
    from etcdspec.checker.edn import EdnError
    from etcdspec.checker.history import HistoryError
    from etcdspec.checker.jepsen import import_jepsen

    texts = mutated_text(_data_files(".edn"))

    def check(value: tuple[str, str]) -> bool:
        text, model = value
        try:
            import_jepsen(text, model, "fuzz.edn")
        except (EdnError, HistoryError) as error:
            _named(error, "fuzz.edn")
            return True
        return False

    return FuzzTarget("edn", st.tuples(texts, st.sampled_from(("register", "kv"))), check)


def spec_windows(lines_per: int = 14) -> list[str]:
    """The built-in specs cut into windows of whole paragraphs (a few declarations), so
    that one input parses in milliseconds."""
    windows = []
    for path in sorted((ROOT / "spec").glob("*.spec")):
        paragraphs = path.read_text().split("\n\n")
        window: list[str] = []
        for paragraph in paragraphs:
            window.append(paragraph)
            if sum(p.count("\n") + 1 for p in window) >= lines_per:
                windows.append("\n\n".join(window))
                window = []
        if window:
            windows.append("\n\n".join(window))
    return windows


def spec_target() -> FuzzTarget:
    from etcdspec.spec.errors import SpecErrors
    from etcdspec.spec.loader import load_text

    def check(text: str) -> bool:
        try:
            load_text(text, "fuzz.spec")
        except SpecErrors as error:
            for issue in error.issues:
                if issue.filename != "fuzz.spec" or issue.span.line < 0:
                    raise FuzzFinding(f"an issue without a place: {issue.describe()}") from None
            return True
        return False

    return FuzzTarget("spec", mutated_text(spec_windows()), check)


def _no_fsync(fd: int) -> None:
    pass


def wal_corpus(folder: Path) -> list[tuple[tuple[str, bytes], ...]]:
    """WALs written by Wal: a few batches in one segment; several segments (small
    segment size) with a snapshot record; one allocated ahead (a zero tail)."""
    from etcdspec.impl.raft.messages import Entry, HardState, SnapshotMeta
    from etcdspec.impl.storage.wal import Wal

    corpus = []
    shapes = [
        {"segment_bytes": 1 << 20, "preallocate_bytes": 0},
        {"segment_bytes": 300, "preallocate_bytes": 0},
        {"segment_bytes": 1 << 20, "preallocate_bytes": 2048},
    ]
    for number, shape in enumerate(shapes):
        directory = folder / f"wal-{number}"
        wal, _ = Wal.open(directory, fsync=_no_fsync, **shape)
        index = 0
        for term in (1, 2):
            for _ in range(3):
                batch = [Entry(term, index + k, b"v%d" % (index + k)) for k in (1, 2)]
                index += 2
                wal.save(HardState(term, 1, index - 1), batch)
            if number == 1 and term == 1:
                wal.save_snapshot(SnapshotMeta(index - 2, 1, (1, 2, 3)))
        wal.close()
        corpus.append(tuple((p.name, p.read_bytes()) for p in sorted(directory.iterdir())))
    return corpus


def _write_segments(directory: Path, files: Sequence[tuple[str, bytes]]) -> None:
    if directory.exists():
        for stale in directory.iterdir():
            stale.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files:
        (directory / name).write_bytes(data)


def wal_target() -> FuzzTarget:
    """A mutated WAL must be refused naming the segment, or open as a state the WAL had:
    the state after some prefix of its records (a cut in the last segment, which a
    member cannot tell from records never written; etcd cannot either)."""
    from etcdspec.impl.storage.wal import Wal, WalError

    logging.disable(logging.WARNING)  # every cut below warns of its torn tail
    scratch = tempfile.TemporaryDirectory(prefix="fuzz-wal-")
    folder = Path(scratch.name)
    corpus = wal_corpus(folder / "corpus")
    work = folder / "work"
    had: list[set[str]] = []  # per corpus item: the states a cut of its last segment gives
    for files in corpus:
        states = set()
        *head, (last, data) = files
        for cut in _record_ends(data):
            _write_segments(work, [*head, (last, data[:cut])])
            try:
                wal, state = Wal.open(work, fsync=_no_fsync, preallocate_bytes=0)
            except WalError:
                continue
            wal.close()
            states.add(_wal_state(state))
        had.append(states)

    @st.composite
    def inputs(draw: st.DrawFn) -> tuple[int, int, bytes]:
        number = draw(st.integers(0, len(corpus) - 1))
        segment = draw(st.integers(0, len(corpus[number]) - 1))
        return number, segment, draw(mutated([corpus[number][segment][1]]))

    def check(value: tuple[int, int, bytes]) -> bool:
        number, segment, data = value
        files = list(corpus[number])
        files[segment] = (files[segment][0], data)
        _write_segments(work, files)
        try:
            wal, state = Wal.open(work, fsync=_no_fsync, preallocate_bytes=0)
        except WalError as error:
            _named(error, str(work))
            return True
        wal.close()
        if _wal_state(state) not in had[number]:
            raise FuzzFinding(
                f"silent wrong result: opened as {state.describe()}, a state the WAL never had"
            )
        return False

    return FuzzTarget("wal", inputs(), check, close=scratch.cleanup)


def _record_ends(data: bytes) -> list[int]:
    """Where each record of a segment ends (impl/storage/wal.py's framing: a 13-byte
    header whose first field is the payload length), from 0: a cut anywhere inside a
    record gives the state of a cut at its start (a torn tail), so these are all the
    states a cut can give."""
    ends = [0]
    while ends[-1] + 13 <= len(data):
        length = int.from_bytes(data[ends[-1] : ends[-1] + 4], "big")
        if length == 0:
            break  # the zeros allocated ahead
        ends.append(min(ends[-1] + 13 + length, len(data)))
    return [*ends, len(data)]


def _wal_state(state: Any) -> str:
    """A WAL state's hard state, snapshot and entries (not its warnings) as one text."""
    entries = ";".join(f"{e.term}/{e.index}/{e.data!r}" for e in state.entries)
    return f"{state.hard_state.describe()} {state.snapshot} {entries}"


def snapfile_target() -> FuzzTarget:
    from etcdspec.impl.raft.messages import Snapshot, SnapshotMeta
    from etcdspec.impl.storage.snapfile import SnapshotFileError, decode, encode

    snapshots = [
        Snapshot(SnapshotMeta(7, 2, (1, 2, 3))),
        Snapshot(SnapshotMeta(1000, 5, (1, 2), (3,)), b"database bytes " * 20),
    ]
    corpus = [encode(snapshot) for snapshot in snapshots]

    def check(data: bytes) -> bool:
        try:
            got = decode(data, "fuzz.snap")
        except SnapshotFileError as error:
            _named(error, "fuzz.snap")
            return True
        if data not in corpus:
            raise FuzzFinding(f"silent wrong result: a damaged file read as {got.describe()}")
        return False

    return FuzzTarget("snapfile", mutated(corpus) | st.binary(max_size=100), check)


def etcd_snapshot_corpus() -> list[bytes]:
    """Small etcd 3.5 databases as etcd lays them out (a few key revisions, a tombstone,
    a lease, meta and auth buckets; one with values spilling onto overflow pages), each
    also with the SHA-256 etcdctl appends."""
    from etcdspec.impl.kv.bbolt_writer import write_bbolt
    from etcdspec.impl.kv.etcd_export import lease_bytes
    from etcdspec.impl.kv.etcd_format import key_value_bytes, revision_key

    def u64(value: int) -> bytes:
        return value.to_bytes(8, "big")

    bodies = []
    for size in (3, 40):
        keys = []
        for main in range(2, 2 + size):
            key = b"key-%d" % (main % 5)
            tombstone = main % 7 == 0
            value = b"" if tombstone else b"v" * (main * 97 % 5000 if size > 10 else main)
            lease = 0x1234 if main == 3 else 0
            keys.append(
                (
                    revision_key(main, 0, tombstone),
                    key_value_bytes(key, value, 2, main, 1, lease, tombstone),
                )
            )
        buckets: dict[bytes, list[tuple[bytes, bytes]]] = {
            b"key": keys,
            b"meta": [(b"consistent_index", u64(size + 9)), (b"term", u64(2))],
            b"lease": [(u64(0x1234), lease_bytes(0x1234, 60))],
            b"auth": [(b"authRevision", u64(1))],
            b"authUsers": [],
            b"authRoles": [],
            b"cluster": [(b"clusterVersion", b"3.5.0")],
        }
        body = write_bbolt(buckets)
        bodies += [body, body + hashlib.sha256(body).digest()]
    return bodies


def etcd_snapshot_target() -> FuzzTarget:
    from etcdspec.impl.tools import etcd_snapshot
    from etcdspec.impl.tools.snapshot_cli import DIGEST_BYTES, SnapshotError, split_digest

    corpus = etcd_snapshot_corpus()

    def check(data: bytes) -> bool:
        digest = len(data) % 512 == DIGEST_BYTES  # as snapshot_cli tells the two apart
        try:
            body = split_digest(data, "fuzz.db") if digest else data
            etcd_snapshot.status(body, "fuzz.db")
            etcd_snapshot.read_store(body, "fuzz.db")
        except (SnapshotError, etcd_snapshot.EtcdSnapshotError) as error:
            _named(error, "fuzz.db")
            return True
        if digest and data not in corpus:
            raise FuzzFinding("silent wrong result: a damaged file passed its SHA-256")
        return False

    return FuzzTarget("etcd-snapshot", mutated(corpus), check)


TARGETS: dict[str, Callable[[], FuzzTarget]] = {
    "history": history_target,
    "edn": edn_target,
    "spec": spec_target,
    "wal": wal_target,
    "snapfile": snapfile_target,
    "etcd-snapshot": etcd_snapshot_target,
}


def all_targets() -> dict[str, Callable[[], FuzzTarget]]:
    try:
        from bench.fuzz_grpc import GRPC_TARGETS
    except ImportError:
        return TARGETS
    return {**TARGETS, **GRPC_TARGETS}


def main(argv: Sequence[str] | None = None) -> int:
    targets = all_targets()
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("target", choices=[*targets, "all"])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = list(targets) if args.target == "all" else [args.target]
    worst = 0
    for name in names:
        result = run(targets[name](), args.inputs, args.seed)
        print(result.describe(), flush=True)
        for finding in result.findings[:SHOWN]:
            print("  " + finding.replace("\n", "\n  "), file=sys.stderr)
        worst = max(worst, result.exit_code)
    return worst


if __name__ == "__main__":
    # Through the module's own name: run as __main__, this file's FuzzFinding would not
    # be the class bench.fuzz_grpc raises, and its findings would escape the run.
    from bench import fuzz

    sys.exit(fuzz.main())
