"""server_bench's --security: TLS and authenticated runs of real clusters, and the table
of ratios ours / etcd per mode against the plain one."""

from __future__ import annotations

import pytest

from bench import server_bench
from bench.server_bench import Cell


def cells(ours_ops: int, etcd_ops: int) -> list[Cell]:
    return [
        Cell("ours", "put", 64, ours_ops, 1.0, 1.0, 2.0, 0),
        Cell("etcd", "put", 64, etcd_ops, 1.0, 1.0, 2.0, 0),
    ]


def test_security_ratios_are_medians_over_rounds_and_compared_with_plain() -> None:
    by_mode = {
        "plain": [cells(500, 1000), cells(600, 1000), cells(400, 1000)],
        "tls": [cells(300, 1000), cells(350, 1000), cells(900, 1000)],
    }
    ratios = server_bench.security_ratios(by_mode)
    assert ratios == {("plain", "put", 64): 0.5, ("tls", "put", 64): 0.35}
    table = server_bench.format_security_ratios(by_mode)
    assert "put                       64 | plain          0.50      1.00" in table
    assert "put                       64 | tls            0.35      0.70" in table


def test_unknown_security_mode_is_refused() -> None:
    with pytest.raises(SystemExit) as raised:
        server_bench.main(["--security", "plain,ssh"])
    assert raised.value.code == 2


@pytest.mark.timeout(120)
def test_tls_auth_cells_of_our_cluster_run_without_errors() -> None:
    """Over TLS, as the bench user (a token, permission checked on every put): every
    request answered, none refused."""
    rounds = server_bench.bench_clusters(
        ["ours"],
        [4],
        0.5,
        seed=1,
        workloads=("put",),
        via="leader",
        slice_s=0.5,
        security="tls-auth",
    )
    (cell,) = rounds[0]
    assert cell.ops > 0 and cell.errors == 0
