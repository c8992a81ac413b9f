"""What the etcd model's differential tests share: simulated histories of several shapes
(faults, leases, watches, 5-30 processes) and the step a request takes by the store's
own `apply`, which a fast path of the checker's etcd model must answer alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcdspec.checker.history import Operation, build_history
from etcdspec.checker.model_etcd import EtcdModel
from etcdspec.checker.models import PreparedOp
from etcdspec.checker.simulate import simulate_etcd
from etcdspec.model.errors import StoreError
from etcdspec.model.store import apply

# (seed, processes, fault, leases, watch)
SIMULATIONS: list[tuple[int, int, str | None, bool, bool]] = [
    (1, 5, None, False, False),
    (2, 30, None, True, True),
    (3, 12, "stale_read", True, False),
    (4, 8, "lost_write", False, True),
    (5, 20, "revision_backwards", True, True),
]
SIMULATION_FIELDS = ("seed", "processes", "fault", "leases", "watch")


def simulated_operations(
    seed: int, processes: int, fault: str | None, leases: bool, watch: bool, ops: int
) -> list[Operation]:
    """The operations of one simulated etcd history (15 % of them info)."""
    events = simulate_etcd(
        seed, ops=ops, processes=processes, info_rate=0.15, fault=fault, leases=leases,
        watch=watch,
    )  # fmt: skip
    return list(build_history(events).operations)


def applied_step(state: Any, request: Any, observed: Any) -> list[Any]:
    """The states a request may step to by `apply`, given the recorded response
    (`observed`, None if unknown): none if the store refuses it or answers otherwise."""
    try:
        new_state, response = apply(state, request)
    except StoreError:
        return []
    if observed is not None and response != observed:
        return []
    return [new_state]


class ComparedSteps(EtcdModel):
    """The etcd model whose every step of a `request_type` request (not an auth user's)
    is checked against `applied_step`, with the recorded `response_type` answer as it is
    and as `altered` changes it; `compared` holds each (state, request) checked."""

    def __init__(
        self,
        request_type: type,
        response_type: type,
        altered: Callable[[Any, Any], list[Any]],
    ) -> None:
        super().__init__()
        self.request_type = request_type
        self.response_type = response_type
        self.altered = altered
        self.compared: list[tuple[Any, Any]] = []

    def step(self, state: Any, prepared: PreparedOp) -> list[Any]:
        found = super().step(state, prepared)
        request, observed = prepared.payload
        if type(request) is self.request_type and prepared.op.user is None:
            self.compared.append((state, request))
            assert found == applied_step(state, request, observed)
            if isinstance(observed, self.response_type):
                for other in self.altered(request, observed):
                    altered = prepared._replace(payload=(request, other))
                    assert super().step(state, altered) == applied_step(state, request, other)
        return found
