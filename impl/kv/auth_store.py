"""The auth store, part of the state machine: users, roles, permissions, the enabled flag
and the auth revision, as etcd's auth store keeps them.

Contract:
- Every change is applied from the Raft log (the applier calls the `user_*`, `role_*`,
  `auth_*` methods inside its backend transaction), so its records and the consistent
  index commit together and every member agrees. A refused change raises RpcError with
  etcd's code and message before it writes anything.
- The auth revision starts at 1 and is bumped by every change that succeeds (user and
  role changes, grants, revokes, AuthDisable); AuthEnable does not bump it (etcd 3.5).
- Rules as etcd's: AuthEnable needs a user `root` holding the role `root` (the role need
  not exist as a record); while auth is enabled the root user cannot be deleted nor lose
  the root role, nor the root role be deleted; a user with the root role may do
  anything.
- Passwords are bcrypt hashes, made before proposing (`hash_password`, in the API layer)
  so the log never holds a password; `check_password` runs before an Authenticate is
  proposed.
- Permission checks (`check_*`) take the user and the auth revision a token was checked
  at: nobody (no token) is refused with "user name is empty", a request checked at an
  older revision than the store's with "auth: revision in header is old" (the client then
  authenticates again), a user without the permission with "permission denied". When
  auth is disabled every check passes.
- An in-memory copy of the records serves reads; `reload()` reads them back from the
  backend (at start and after a snapshot is restored). Not thread-safe: the member's
  event loop only.
"""

from __future__ import annotations

import base64
import bisect

import bcrypt

from etcdspec.impl import errors, failpoints
from etcdspec.impl.errors import RpcError
from etcdspec.impl.kv.auth_perms import READ, WRITE, UserPerms
from etcdspec.impl.kv.auth_tokens import (
    NO_USER,
    AuthInfo,
    SimpleTokens,
    TokenNotApplied,
    TokenProvider,
    simple_token_index,
)
from etcdspec.impl.kv.backend import Backend
from etcdspec.impl.pb import auth_pb2, rpc_pb2

ROOT = "root"  # the root user and the root role are both named root
BCRYPT_COST = 10  # etcd's --bcrypt-cost default (bcrypt.DefaultCost)


def hash_password(password: str, cost: int = BCRYPT_COST) -> str:
    """The hashedPassword field for `password`: base64 of its bcrypt hash (as etcd's
    server fills AuthUserAddRequest.hashedPassword before proposing)."""
    digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=cost))
    return base64.b64encode(digest).decode()


def password_matches(password: str, digest: bytes) -> None:
    """Refuse with AUTH_FAILED unless `password` hashes to `digest` (any thread)."""
    try:
        matched = bcrypt.checkpw(password.encode(), digest)
    except ValueError:  # a hash bcrypt cannot read
        matched = False
    if not matched:
        raise RpcError(errors.AUTH_FAILED)


class AuthStore:
    """See the module docstring."""

    def __init__(self, backend: Backend, tokens: TokenProvider | None = None) -> None:
        self.backend = backend
        self.tokens: TokenProvider = tokens if tokens is not None else SimpleTokens()
        self.enabled = False
        self.revision = 1
        self._users: dict[str, auth_pb2.User] = {}
        self._roles: dict[str, auth_pb2.Role] = {}
        self._perms: dict[str, UserPerms] = {}
        self.reload()

    def reload(self) -> None:
        """Read every record back from the backend (start, snapshot restore)."""
        self.enabled, self.revision = self.backend.auth_state()
        self._users = {}
        for name, record in self.backend.auth_records("user"):
            self._users[name.decode()] = auth_pb2.User.FromString(record)
        self._roles = {}
        for name, record in self.backend.auth_records("role"):
            self._roles[name.decode()] = auth_pb2.Role.FromString(record)
        self._perms = {}

    def describe(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        return (
            f"auth {state} at revision {self.revision}: {len(self._users)} users, "
            f"{len(self._roles)} roles; {self.tokens.describe()}"
        )

    # ---- writes (from the log) ------------------------------------------------------

    def _bump(self) -> None:
        self.revision += 1
        self.backend.set_auth_state(self.enabled, self.revision)
        self._perms = {}

    def _save_user(self, user: auth_pb2.User) -> None:
        self.backend.put_auth_record("user", user.name, user.SerializeToString())
        self._users[user.name.decode()] = user

    def _save_role(self, role: auth_pb2.Role) -> None:
        self.backend.put_auth_record("role", role.name, role.SerializeToString())
        self._roles[role.name.decode()] = role

    def _user(self, name: str) -> auth_pb2.User:
        user = self._users.get(name)
        if user is None:
            raise RpcError(errors.USER_NOT_FOUND, name)
        return user

    def _role(self, name: str) -> auth_pb2.Role:
        role = self._roles.get(name)
        if role is None:
            raise RpcError(errors.ROLE_NOT_FOUND, name)
        return role

    def auth_enable(self) -> rpc_pb2.AuthEnableResponse:
        if not self.enabled:
            root = self._users.get(ROOT)
            if root is None:
                raise RpcError(errors.ROOT_USER_NOT_EXIST)
            if ROOT not in root.roles:
                raise RpcError(errors.ROOT_ROLE_NOT_EXIST)
            self.enabled = True
            self.backend.set_auth_state(True, self.revision)
            self._perms = {}
        return rpc_pb2.AuthEnableResponse()

    def auth_disable(self) -> rpc_pb2.AuthDisableResponse:
        if self.enabled:
            self.enabled = False
            self._bump()
            self.tokens.disable()
        return rpc_pb2.AuthDisableResponse()

    def auth_status(self) -> rpc_pb2.AuthStatusResponse:
        return rpc_pb2.AuthStatusResponse(enabled=self.enabled, authRevision=self.revision)

    def authenticate(self, name: str, prefix: str, index: int) -> rpc_pb2.AuthenticateResponse:
        """Assign a token to `name` (its password was checked before proposing)."""
        if not self.enabled:
            raise RpcError(errors.AUTH_NOT_ENABLED)
        user = self._users.get(name)
        if user is None or user.options.no_password:
            raise RpcError(errors.AUTH_FAILED)
        token = self.tokens.assign(name, self.revision, prefix, index)
        return rpc_pb2.AuthenticateResponse(token=token)

    def user_add(self, request: rpc_pb2.AuthUserAddRequest) -> rpc_pb2.AuthUserAddResponse:
        if not request.name:
            raise RpcError(errors.USER_EMPTY)
        if request.name in self._users:
            raise RpcError(errors.USER_ALREADY_EXIST, request.name)
        password = b""
        if not request.options.no_password:
            password = base64.b64decode(request.hashedPassword)
        user = auth_pb2.User(name=request.name.encode(), password=password)
        user.options.CopyFrom(request.options)
        self._save_user(user)
        self._bump()
        return rpc_pb2.AuthUserAddResponse()

    def user_delete(self, request: rpc_pb2.AuthUserDeleteRequest) -> rpc_pb2.AuthUserDeleteResponse:
        if self.enabled and request.name == ROOT:
            raise RpcError(errors.INVALID_AUTH_MGMT, "the root user cannot be deleted")
        self._user(request.name)
        self.backend.delete_auth_record("user", request.name.encode())
        del self._users[request.name]
        self._bump()
        self.tokens.invalidate_user(request.name)
        return rpc_pb2.AuthUserDeleteResponse()

    def user_change_password(
        self, request: rpc_pb2.AuthUserChangePasswordRequest
    ) -> rpc_pb2.AuthUserChangePasswordResponse:
        old = self._user(request.name)
        user = auth_pb2.User()
        user.CopyFrom(old)
        user.password = base64.b64decode(request.hashedPassword)
        self._save_user(user)
        self._bump()
        self.tokens.invalidate_user(request.name)
        return rpc_pb2.AuthUserChangePasswordResponse()

    def user_grant_role(
        self, request: rpc_pb2.AuthUserGrantRoleRequest
    ) -> rpc_pb2.AuthUserGrantRoleResponse:
        old = self._user(request.user)
        if request.role != ROOT:
            self._role(request.role)
        if request.role in old.roles:
            return rpc_pb2.AuthUserGrantRoleResponse()  # etcd ignores a repeated grant
        user = auth_pb2.User()
        user.CopyFrom(old)
        roles = list(user.roles)
        bisect.insort(roles, request.role)
        del user.roles[:]
        user.roles.extend(roles)
        self._save_user(user)
        self._bump()
        return rpc_pb2.AuthUserGrantRoleResponse()

    def user_revoke_role(
        self, request: rpc_pb2.AuthUserRevokeRoleRequest
    ) -> rpc_pb2.AuthUserRevokeRoleResponse:
        if self.enabled and request.name == ROOT and request.role == ROOT:
            raise RpcError(errors.INVALID_AUTH_MGMT, "the root user must keep the root role")
        old = self._user(request.name)
        if request.role not in old.roles:
            raise RpcError(errors.ROLE_NOT_GRANTED, f"{request.role} of {request.name}")
        user = auth_pb2.User()
        user.CopyFrom(old)
        user.roles.remove(request.role)
        self._save_user(user)
        self._bump()
        return rpc_pb2.AuthUserRevokeRoleResponse()

    def role_add(self, request: rpc_pb2.AuthRoleAddRequest) -> rpc_pb2.AuthRoleAddResponse:
        if not request.name:
            raise RpcError(errors.ROLE_EMPTY)
        if request.name in self._roles:
            raise RpcError(errors.ROLE_ALREADY_EXIST, request.name)
        self._save_role(auth_pb2.Role(name=request.name.encode()))
        self._bump()
        return rpc_pb2.AuthRoleAddResponse()

    def role_delete(self, request: rpc_pb2.AuthRoleDeleteRequest) -> rpc_pb2.AuthRoleDeleteResponse:
        if self.enabled and request.role == ROOT:
            raise RpcError(errors.INVALID_AUTH_MGMT, "the root role cannot be deleted")
        self._role(request.role)
        self.backend.delete_auth_record("role", request.role.encode())
        del self._roles[request.role]
        for old in list(self._users.values()):
            if request.role in old.roles:
                user = auth_pb2.User()
                user.CopyFrom(old)
                user.roles.remove(request.role)
                self._save_user(user)
        self._bump()
        return rpc_pb2.AuthRoleDeleteResponse()

    def role_grant_permission(
        self, request: rpc_pb2.AuthRoleGrantPermissionRequest
    ) -> rpc_pb2.AuthRoleGrantPermissionResponse:
        old = self._role(request.name)
        if not request.HasField("perm"):
            raise RpcError(errors.PERMISSION_NOT_GIVEN)
        role = auth_pb2.Role()
        role.CopyFrom(old)
        perms = list(role.keyPermission)
        for perm in perms:
            if perm.key == request.perm.key and perm.range_end == request.perm.range_end:
                perm.permType = request.perm.permType
                break
        else:
            perms.append(request.perm)
            perms.sort(key=lambda p: p.key)
        del role.keyPermission[:]
        role.keyPermission.extend(perms)
        self._save_role(role)
        self._bump()
        return rpc_pb2.AuthRoleGrantPermissionResponse()

    def role_revoke_permission(
        self, request: rpc_pb2.AuthRoleRevokePermissionRequest
    ) -> rpc_pb2.AuthRoleRevokePermissionResponse:
        old = self._role(request.role)
        kept = [
            p
            for p in old.keyPermission
            if not (p.key == request.key and p.range_end == request.range_end)
        ]
        if len(kept) == len(old.keyPermission):
            raise RpcError(errors.PERMISSION_NOT_GRANTED, request.role)
        role = auth_pb2.Role(name=old.name, keyPermission=kept)
        self._save_role(role)
        self._bump()
        return rpc_pb2.AuthRoleRevokePermissionResponse()

    # ---- reads ----------------------------------------------------------------------

    def user_get(self, request: rpc_pb2.AuthUserGetRequest) -> rpc_pb2.AuthUserGetResponse:
        return rpc_pb2.AuthUserGetResponse(roles=list(self._user(request.name).roles))

    def user_list(self) -> rpc_pb2.AuthUserListResponse:
        return rpc_pb2.AuthUserListResponse(users=sorted(self._users))

    def role_get(self, request: rpc_pb2.AuthRoleGetRequest) -> rpc_pb2.AuthRoleGetResponse:
        return rpc_pb2.AuthRoleGetResponse(perm=list(self._role(request.role).keyPermission))

    def role_list(self) -> rpc_pb2.AuthRoleListResponse:
        return rpc_pb2.AuthRoleListResponse(roles=sorted(self._roles))

    def has_role(self, username: str, role: str) -> bool:
        user = self._users.get(username)
        return user is not None and role in user.roles

    def password_record(self, name: str) -> tuple[bytes, int]:
        """(`name`'s password hash, the auth revision now), for `password_matches`;
        AUTH_FAILED for an unknown user, NO_PASSWORD_USER for one added without a
        password, AUTH_NOT_ENABLED when auth is off."""
        if not self.enabled:
            raise RpcError(errors.AUTH_NOT_ENABLED)
        user = self._users.get(name)
        if user is not None and user.options.no_password:
            raise RpcError(errors.NO_PASSWORD_USER, name)
        if user is None or not user.password:
            raise RpcError(errors.AUTH_FAILED)
        return user.password, self.revision

    def check_password(self, name: str, password: str) -> int:
        """The auth revision at which `name`'s password matched; AUTH_FAILED otherwise.
        Costs one bcrypt check, on this thread."""
        digest, revision = self.password_record(name)
        password_matches(password, digest)
        return revision

    # ---- tokens and permission checks ------------------------------------------------

    def auth_info(self, token: str) -> AuthInfo:
        """Who `token` names; INVALID_AUTH_TOKEN when nobody; TokenNotApplied for a simple
        token issued at a log index this member has not applied yet."""
        info = self.tokens.info(token, self.revision)
        if info is None:
            index = simple_token_index(token)
            if (
                isinstance(self.tokens, SimpleTokens)
                and index is not None
                and index > self.backend.consistent_index()
            ):
                raise TokenNotApplied(index)
            raise RpcError(errors.INVALID_AUTH_TOKEN)
        return info

    def check_admin(self, info: AuthInfo) -> None:
        """Refuse unless auth is off or `info` is a user with the root role."""
        if not self.enabled:
            return
        if not info.username:
            raise RpcError(errors.USER_EMPTY)
        user = self._users.get(info.username)
        if user is None:
            raise RpcError(errors.USER_NOT_FOUND, info.username)
        if ROOT not in user.roles:
            raise RpcError(errors.PERMISSION_DENIED, f"{info.username} is not root")

    def _check(self, info: AuthInfo, perm_type: int, key: bytes, range_end: bytes) -> None:
        if not self.enabled:
            return
        if info.revision == 0:
            raise RpcError(errors.USER_EMPTY)
        if info.revision < self.revision:
            raise RpcError(errors.AUTH_OLD_REVISION, f"{info.revision} < {self.revision}")
        user = self._users.get(info.username)
        if user is None:
            raise RpcError(errors.PERMISSION_DENIED, f"no user {info.username}")
        if ROOT in user.roles:
            return
        perms = self._perms.get(info.username)
        if perms is None:
            roles = [self._roles[r] for r in user.roles if r in self._roles]
            perms = self._perms[info.username] = UserPerms.of_roles(roles)
        if not perms.permits(perm_type, key, range_end):
            raise RpcError(errors.PERMISSION_DENIED, f"{info.username} over {key!r}")

    def check_range(self, info: AuthInfo, key: bytes, range_end: bytes) -> None:
        if failpoints.on("auth_skip_range_check") and self.enabled and info.revision:
            return  # the planted bug: a range is never checked against READ grants
        self._check(info, READ, key, range_end)

    def check_put(self, info: AuthInfo, key: bytes) -> None:
        self._check(info, WRITE, key, b"")

    def check_delete(self, info: AuthInfo, key: bytes, range_end: bytes) -> None:
        self._check(info, WRITE, key, range_end)

    def check_txn(self, info: AuthInfo, txn: rpc_pb2.TxnRequest) -> None:
        """Every compare's range READ, and every operation of both branches (etcd's
        checkTxnAuth; a nested txn is checked the same way)."""
        for compare in txn.compare:
            self.check_range(info, compare.key, compare.range_end)
        for op in (*txn.success, *txn.failure):
            kind = op.WhichOneof("request")
            if kind == "request_range":
                self.check_range(info, op.request_range.key, op.request_range.range_end)
            elif kind == "request_put":
                self.check_put(info, op.request_put.key)
            elif kind == "request_delete_range":
                delete = op.request_delete_range
                if delete.prev_kv:
                    self.check_range(info, delete.key, delete.range_end)
                self.check_delete(info, delete.key, delete.range_end)
            elif kind == "request_txn":
                self.check_txn(info, op.request_txn)


__all__ = ["NO_USER", "ROOT", "AuthInfo", "AuthStore", "hash_password", "password_matches"]
