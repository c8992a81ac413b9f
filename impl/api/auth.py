"""etcd's Auth service: enable/disable/status, Authenticate, users and roles.

Every request goes through Raft (as in etcd 3.5), carrying its caller, and the applier
makes etcd's root check and the change (etcdspec.impl.kv.auth_store), so every member
agrees. Passwords are hashed with bcrypt here, in a worker thread, before proposing: the
log holds the hash, never the password.

Authenticate: after a linearizable wait, the password is checked here (bcrypt, in a
worker thread), then an Authenticate entry carrying a fresh random token prefix (not the
password) is proposed; applying it gives every member the token `<prefix>.<index>` (or
signs a JWT). If the auth store changed between the check and the apply, it is done
again, as etcd does, so a token is never issued on a password changed meanwhile.
"""

from __future__ import annotations

import asyncio

from etcdspec.impl.api.handlers import Context, caller, propose, unary_in_context
from etcdspec.impl.api.ports import MemberPorts
from etcdspec.impl.kv.auth_store import hash_password, password_matches
from etcdspec.impl.kv.auth_tokens import new_token_prefix
from etcdspec.impl.pb import raft_internal_pb2 as internal_pb2
from etcdspec.impl.pb import rpc_pb2, rpc_pb2_grpc


class AuthServicer(rpc_pb2_grpc.AuthServicer):
    def __init__(self, ports: MemberPorts) -> None:
        self.auth = ports.state.auth
        self.bcrypt_cost = ports.bcrypt_cost  # etcd's --bcrypt-cost
        self.cert_auth = ports.client_cert_auth  # a certificate's CN as the caller
        self.proposer = ports.proposer
        self.reads = ports.reads
        self.cluster = ports.cluster

    @unary_in_context
    async def AuthEnable(
        self, request: rpc_pb2.AuthEnableRequest, context: Context
    ) -> rpc_pb2.AuthEnableResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "auth_enable", request, rpc_pb2.AuthEnableResponse, who)

    @unary_in_context
    async def AuthDisable(
        self, request: rpc_pb2.AuthDisableRequest, context: Context
    ) -> rpc_pb2.AuthDisableResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_disable", request, rpc_pb2.AuthDisableResponse, who
        )

    @unary_in_context
    async def AuthStatus(
        self, request: rpc_pb2.AuthStatusRequest, context: Context
    ) -> rpc_pb2.AuthStatusResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(self.proposer, "auth_status", request, rpc_pb2.AuthStatusResponse, who)

    @unary_in_context
    async def Authenticate(
        self, request: rpc_pb2.AuthenticateRequest, context: Context
    ) -> rpc_pb2.AuthenticateResponse:
        await self.reads.barrier()
        while True:
            digest, checked = self.auth.password_record(request.name)
            await asyncio.to_thread(password_matches, request.password, digest)
            entry = internal_pb2.InternalAuthenticateRequest(
                name=request.name, simple_token=new_token_prefix()
            )
            response = await propose(
                self.proposer, "authenticate", entry, rpc_pb2.AuthenticateResponse
            )
            if checked == self.auth.revision:
                return response

    @unary_in_context
    async def UserAdd(
        self, request: rpc_pb2.AuthUserAddRequest, context: Context
    ) -> rpc_pb2.AuthUserAddResponse:
        who = caller(self.auth, context, self.cert_auth)
        # A client's own hashedPassword is ignored, as etcd 3.5.1 ignores it (it hashes
        # `password`, "" too): a hashedPassword that was not base64 had reached the apply
        # and stopped every member (bench/fuzz_grpc.py found it).
        request.hashedPassword = ""
        if not request.options.no_password:
            request.hashedPassword = await asyncio.to_thread(
                hash_password, request.password, self.bcrypt_cost
            )
        request.password = ""
        return await propose(
            self.proposer, "auth_user_add", request, rpc_pb2.AuthUserAddResponse, who
        )

    @unary_in_context
    async def UserGet(
        self, request: rpc_pb2.AuthUserGetRequest, context: Context
    ) -> rpc_pb2.AuthUserGetResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_user_get", request, rpc_pb2.AuthUserGetResponse, who
        )

    @unary_in_context
    async def UserList(
        self, request: rpc_pb2.AuthUserListRequest, context: Context
    ) -> rpc_pb2.AuthUserListResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_user_list", request, rpc_pb2.AuthUserListResponse, who
        )

    @unary_in_context
    async def UserDelete(
        self, request: rpc_pb2.AuthUserDeleteRequest, context: Context
    ) -> rpc_pb2.AuthUserDeleteResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_user_delete", request, rpc_pb2.AuthUserDeleteResponse, who
        )

    @unary_in_context
    async def UserChangePassword(
        self, request: rpc_pb2.AuthUserChangePasswordRequest, context: Context
    ) -> rpc_pb2.AuthUserChangePasswordResponse:
        who = caller(self.auth, context, self.cert_auth)
        request.hashedPassword = await asyncio.to_thread(  # a client's own: as UserAdd
            hash_password, request.password, self.bcrypt_cost
        )
        request.password = ""
        return await propose(
            self.proposer,
            "auth_user_change_password",
            request,
            rpc_pb2.AuthUserChangePasswordResponse,
            who,
        )

    @unary_in_context
    async def UserGrantRole(
        self, request: rpc_pb2.AuthUserGrantRoleRequest, context: Context
    ) -> rpc_pb2.AuthUserGrantRoleResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_user_grant_role", request, rpc_pb2.AuthUserGrantRoleResponse, who
        )

    @unary_in_context
    async def UserRevokeRole(
        self, request: rpc_pb2.AuthUserRevokeRoleRequest, context: Context
    ) -> rpc_pb2.AuthUserRevokeRoleResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer,
            "auth_user_revoke_role",
            request,
            rpc_pb2.AuthUserRevokeRoleResponse,
            who,
        )

    @unary_in_context
    async def RoleAdd(
        self, request: rpc_pb2.AuthRoleAddRequest, context: Context
    ) -> rpc_pb2.AuthRoleAddResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_role_add", request, rpc_pb2.AuthRoleAddResponse, who
        )

    @unary_in_context
    async def RoleGet(
        self, request: rpc_pb2.AuthRoleGetRequest, context: Context
    ) -> rpc_pb2.AuthRoleGetResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_role_get", request, rpc_pb2.AuthRoleGetResponse, who
        )

    @unary_in_context
    async def RoleList(
        self, request: rpc_pb2.AuthRoleListRequest, context: Context
    ) -> rpc_pb2.AuthRoleListResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_role_list", request, rpc_pb2.AuthRoleListResponse, who
        )

    @unary_in_context
    async def RoleDelete(
        self, request: rpc_pb2.AuthRoleDeleteRequest, context: Context
    ) -> rpc_pb2.AuthRoleDeleteResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer, "auth_role_delete", request, rpc_pb2.AuthRoleDeleteResponse, who
        )

    @unary_in_context
    async def RoleGrantPermission(
        self, request: rpc_pb2.AuthRoleGrantPermissionRequest, context: Context
    ) -> rpc_pb2.AuthRoleGrantPermissionResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer,
            "auth_role_grant_permission",
            request,
            rpc_pb2.AuthRoleGrantPermissionResponse,
            who,
        )

    @unary_in_context
    async def RoleRevokePermission(
        self, request: rpc_pb2.AuthRoleRevokePermissionRequest, context: Context
    ) -> rpc_pb2.AuthRoleRevokePermissionResponse:
        who = caller(self.auth, context, self.cert_auth)
        return await propose(
            self.proposer,
            "auth_role_revoke_permission",
            request,
            rpc_pb2.AuthRoleRevokePermissionResponse,
            who,
        )
