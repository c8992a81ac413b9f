"""A member publishes its attributes through the Raft log when it starts.

`publish_attributes(proposals, config)` proposes this member's name and client URLs (a
`cluster_member_attr_set` request, etcd 3.5's ClusterMemberAttrSet; etcd 3.4 and 3.5
publish the same through the v2 store) and waits until the entry is applied here. Every
member applies it to the member's record (etcdspec.impl.kv.members), so MemberList
answers from the applied state on every member: a member that is down is still listed
with the name and client URLs it published, across restarts and snapshots. As etcd's
publish, it runs on every start and retries until it succeeds or the member stops: an
attempt that fails at once (no leader yet, leadership moving) is tried again after
PUBLISH_RETRY_S; one not applied here within PUBLISH_ATTEMPT_S, at once (a proposal a
follower forwards before its connection to the leader is up is lost; applying the same
attributes twice changes nothing).

Runs on the member's event loop, as a task of its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from google.protobuf.message import Message as PbMessage

from etcdspec.impl import errors
from etcdspec.impl.errors import RpcError
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.server.config import MemberConfig

# How long to wait before proposing again after an attempt refused at once.
PUBLISH_RETRY_S = 0.1
# How long one attempt may wait to be applied here before the next is proposed.
PUBLISH_ATTEMPT_S = 1.0

log = logging.getLogger("etcdspec.impl.server.publish")


class Proposer(Protocol):
    """Who proposes a request and waits until it is applied (server.proposals)."""

    async def propose(self, request: internal_pb2.InternalRaftRequest) -> PbMessage: ...


def attributes_request(config: MemberConfig) -> internal_pb2.InternalRaftRequest:
    """The request that publishes `config`'s member: its name and advertised client URLs,
    made as the member's own (applied with root's rights when auth is enabled)."""
    request = internal_pb2.InternalRaftRequest(
        cluster_member_attr_set=internal_pb2.ClusterMemberAttrSetRequest(
            member_ID=config.member_id,
            member_attributes=internal_pb2.MemberAttributes(
                name=config.name,
                client_urls=[endpoint.url for endpoint in config.advertise_client_urls],
            ),
        )
    )
    request.header.as_member = True
    return request


async def publish_attributes(proposals: Proposer, config: MemberConfig) -> bool:
    """Publish this member's attributes (see the module docstring); True once applied
    here, False if the member stopped first."""
    attempts = 0
    while True:
        attempts += 1
        try:
            await asyncio.wait_for(proposals.propose(attributes_request(config)), PUBLISH_ATTEMPT_S)
        except TimeoutError:
            log.info(
                "publishing local member to cluster through raft is taking long; proposing again",
                extra={"attempt": attempts},
            )
            continue
        except RpcError as error:
            if error.kind is errors.STOPPED:
                return False
            log.info(
                "failed to publish local member to cluster through raft; retrying",
                extra={"attempt": attempts, "error": error.describe()},
            )
            if error.kind not in (errors.TIMEOUT, errors.TIMEOUT_LEADER_FAIL):
                await asyncio.sleep(PUBLISH_RETRY_S)
            continue
        log.info(
            "published local member to cluster through raft",
            extra={"member": config.name, "attempts": attempts},
        )
        return True
