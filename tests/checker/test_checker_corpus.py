"""The correctness corpus (tests/checker/data): hand-written minimal histories, each with
its known verdict, checked through the library and the `etcdspec check` command."""

from __future__ import annotations

from pathlib import Path

import pytest

from etcdspec.checker.check import BadInput, CheckOptions, check_history, load_history
from etcdspec.cli.main import run
from etcdspec.exitcodes import ExitCode
from etcdspec.verdict import Verdict

DATA = Path(__file__).parent / "data"
ALL_WATCH = {"Ordered", "Unique", "Reliable", "Atomic", "Resumable", "Bookmarkable"}

# (file, model, verdict, checks that must fail)
CORPUS = [
    ("etcd_ok.jsonl", "etcd", Verdict.TRUE, set()),
    ("etcd_stale_read.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_lost_write.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_write_seen_before_invoke.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_txn_partial.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_revision_backwards.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_info_put_took_effect.jsonl", "etcd", Verdict.TRUE, set()),
    ("etcd_info_put_never_took_effect.jsonl", "etcd", Verdict.TRUE, set()),
    ("etcd_wrong_prev_kv.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_lease_expired.jsonl", "etcd", Verdict.TRUE, set()),
    # the key vanishes 40 ns after its lease (TTL 10 s) was granted: no expiry explains it
    ("etcd_lease_expired_too_early.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    # lease 5 (no keys) expires unseen before a keep-alive finds it gone; the revision
    # gap at 3 is the info put's, not an expiry's (a key-less expiry fills no revision)
    ("etcd_lease_keyless_expiry.jsonl", "etcd", Verdict.TRUE, set()),
    # ... a is gone at 3, but only lease 6's expiry deletes it and 6 is alive after
    ("etcd_lease_keyless_expiry_broken.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("etcd_info_put_ignore_value.jsonl", "etcd", Verdict.TRUE, set()),
    ("etcd_deleted_key_read.jsonl", "etcd", Verdict.FALSE, {"Linearizable"}),
    ("watch_ok.jsonl", "etcd", Verdict.TRUE, set()),
    # two info puts to k read back keys-only: the watch tells which one took revision 2
    ("watch_picks_the_info_write.jsonl", "etcd", Verdict.TRUE, set()),
    ("watch_shows_an_unwritten_value.jsonl", "etcd", Verdict.FALSE, {"Valid"}),
    # leases 5 (key a) and 6 (key b), same TTL, both expire; the watch shows b's lease
    # went first (revision 4): the synthetic expiries take the revisions the watch saw
    ("watch_lease_expiry_order.jsonl", "etcd", Verdict.TRUE, set()),
    # ... but a read at revision 4 shows a gone and b still there: the watch is wrong
    ("watch_lease_expiry_order_broken.jsonl", "etcd", Verdict.FALSE, {"Reliable", "Valid"}),
    # ... a's expiry (revision 5) never reaches the watch, which goes on to revision 6
    ("watch_lease_expiry_unseen.jsonl", "etcd", Verdict.FALSE, {"Reliable"}),
    # both expiries come after the last operation: only the watch shows them
    ("watch_lease_expiry_after_last_op.jsonl", "etcd", Verdict.TRUE, set()),
    # ... both at revision 4: no one expiry deletes keys of two leases
    ("watch_lease_expiry_after_last_op_broken.jsonl", "etcd", Verdict.FALSE, {"Valid"}),
    ("watch_ordered_broken.jsonl", "etcd", Verdict.FALSE, {"Ordered"}),
    ("watch_unique_broken.jsonl", "etcd", Verdict.FALSE, {"Unique"}),
    ("watch_reliable_broken.jsonl", "etcd", Verdict.FALSE, {"Reliable"}),
    ("watch_atomic_broken.jsonl", "etcd", Verdict.FALSE, {"Atomic"}),
    ("watch_resumable_broken.jsonl", "etcd", Verdict.FALSE, {"Resumable"}),
    ("watch_bookmarkable_broken.jsonl", "etcd", Verdict.FALSE, {"Bookmarkable"}),
    ("watch_filter_broken.jsonl", "etcd", Verdict.FALSE, {"Filter"}),
    ("watch_prevkv_broken.jsonl", "etcd", Verdict.FALSE, {"PrevKV"}),
    ("watch_iscreate_broken.jsonl", "etcd", Verdict.FALSE, {"IsCreate"}),
    ("register_cas_ok.edn", "register", Verdict.TRUE, set()),
    ("register_cas_bad.edn", "register", Verdict.FALSE, {"Linearizable"}),
    ("register_independent.edn", "register", Verdict.TRUE, set()),
    ("kv_lost_append.jsonl", "kv", Verdict.FALSE, {"Linearizable"}),
]


def _format(name: str) -> str:
    return "edn" if name.endswith(".edn") else "jsonl"


@pytest.mark.parametrize(
    ("name", "model", "verdict", "failing"), CORPUS, ids=[c[0] for c in CORPUS]
)
def test_corpus_verdict(name: str, model: str, verdict: Verdict, failing: set[str]) -> None:
    history = load_history(DATA / name, _format(name), model)
    report = check_history(history, CheckOptions(model=model))
    assert report.verdict is verdict, report.describe()
    broken = {r.name for r in report.results if r.verdict is Verdict.FALSE}
    assert failing <= broken, report.describe()
    # A watch case breaks its own guarantee; the KV history under it stays linearizable.
    if name.startswith("watch_"):
        assert "Linearizable" not in broken


def test_every_watch_guarantee_has_a_broken_case() -> None:
    covered = set().union(*(failing for name, _, _, failing in CORPUS if name.startswith("watch_")))
    assert covered >= ALL_WATCH


def test_lease_expiry_is_needed_to_explain_the_vanished_key() -> None:
    history = load_history(DATA / "etcd_lease_expired.jsonl")
    report = check_history(history, CheckOptions(model="etcd", lease_expiry=False))
    assert report.verdict is Verdict.FALSE


@pytest.mark.parametrize(
    ("name", "model", "code"),
    [
        ("etcd_ok.jsonl", "etcd", ExitCode.HOLDS),
        ("etcd_stale_read.jsonl", "etcd", ExitCode.VIOLATION),
        ("watch_reliable_broken.jsonl", "etcd", ExitCode.VIOLATION),
        ("register_cas_ok.edn", "register", ExitCode.HOLDS),
        ("register_cas_bad.edn", "register", ExitCode.VIOLATION),
        ("bad_two_open_ops.jsonl", "etcd", ExitCode.BAD_INPUT),
        ("etcd_ok.jsonl", "register", ExitCode.BAD_INPUT),
    ],
)
def test_check_command_exit_codes(name: str, model: str, code: ExitCode) -> None:
    assert run(["check", str(DATA / name), "--model", model]) == code


def test_bad_input_names_the_line() -> None:
    with pytest.raises(BadInput, match=r"bad_two_open_ops.jsonl:2:"):
        load_history(DATA / "bad_two_open_ops.jsonl")
