"""The auth store of the model: users, roles, permissions, the enabled flag and the auth
revision, and the permission rule every client request is checked by.

Contract:
- `AuthState` is an immutable, hashable value (part of `StoreState`); `apply_auth`
  returns a new one and a response, or raises a `StoreError` (etcd's code and text) and
  changes nothing. `AuthState()` is a fresh etcd's: disabled, auth revision 1, no users.
- The auth revision starts at 1 and every change that succeeds bumps it by one (user
  and role changes, grants, revokes, AuthDisable that disables); AuthEnable does not
  (etcd 3.5), nor does a repeated role grant, nor a request that only reads.
- Root rules: AuthEnable needs a user `root` holding the role `root` (the role record
  need not exist); while auth is enabled the root user cannot be deleted nor lose the
  root role, and the root role cannot be deleted; a user with the root role may do
  anything.
- `check_client` is the permission rule of a client request while auth is enabled (when
  disabled every request passes). Each key range the request needs is checked in turn
  (a request that needs none, an empty txn, passes even without a token, as in etcd):
  no token -> "user name is empty"; a token checked at
  an auth revision older than the store's -> "auth: revision in header is old"; a user
  that does not exist -> permission denied; the root role -> allowed; otherwise the
  request needs, over every key it touches, READ or WRITE granted by the union of the
  user's roles' permissions: range READ; put WRITE (+ READ with prev_kv, + WRITE on every
  key already attached to the lease it names); delete WRITE (+ READ with prev_kv); txn
  READ for every compare and each op of both branches as above, nested txns alike;
  lease revoke WRITE on every key attached to the lease. Compaction and lease grant,
  keep-alive and time-to-live need no permission (etcd 3.5.1).
- A range [key, range_end) is granted when the permissions of the right type together
  cover it without a gap, whichever roles they come from; a range whose end is not
  after its key (empty or reversed) is granted when a permission holds its key: etcd
  3.5.1's answer with one permission. With several, etcd's interval tree may prune the
  one holding the key and refuse (READ a..c and READ x: range(x..a) refused), an answer
  that depends on the tree's shape; the model does not follow it there.
- Auth requests from a client need the root role while auth is enabled (no token ->
  user name is empty, unknown user -> user name not found, others -> permission denied),
  except Authenticate, UserGet of the caller itself and RoleGet of a role it holds.

Written from etcd's documented behaviour (server/auth/store.go, range_perm_cache.go,
server/etcdserver/apply_auth.go), independently of impl/: the model is the oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from etcdspec.model.auth_requests import (
    AUTH_READ_TYPES,
    AuthDisableRequest,
    AuthDoneResponse,
    AuthEnableRequest,
    AuthenticateRequest,
    AuthRequest,
    AuthResponse,
    AuthRoleAddRequest,
    AuthRoleDeleteRequest,
    AuthRoleGetRequest,
    AuthRoleGetResponse,
    AuthRoleGrantPermissionRequest,
    AuthRoleListRequest,
    AuthRoleListResponse,
    AuthRoleRevokePermissionRequest,
    AuthStatusRequest,
    AuthStatusResponse,
    AuthUserAddRequest,
    AuthUserChangePasswordRequest,
    AuthUserDeleteRequest,
    AuthUserGetRequest,
    AuthUserGetResponse,
    AuthUserGrantRoleRequest,
    AuthUserListRequest,
    AuthUserListResponse,
    AuthUserRevokeRoleRequest,
    Permission,
    PermType,
)
from etcdspec.model.errors import (
    AuthFailedError,
    AuthNotEnabledError,
    AuthOldRevisionError,
    InvalidAuthMgmtError,
    NoPasswordUserError,
    PermissionDeniedError,
    PermissionNotGivenError,
    PermissionNotGrantedError,
    RoleAlreadyExistError,
    RoleEmptyError,
    RoleNotFoundError,
    RoleNotGrantedError,
    RootRoleNotExistError,
    RootUserNotExistError,
    UserAlreadyExistError,
    UserEmptyError,
    UserNotFoundError,
)
from etcdspec.model.requests import (
    RANGE_END_ALL,
    AsUser,
    DeleteRangeRequest,
    LeaseRevokeRequest,
    PutRequest,
    RangeRequest,
    Request,
    ResponseHeader,
    TxnRequest,
    show_range,
)

ROOT = "root"
"""The root user and the root role are both named root."""


@dataclass(frozen=True, slots=True)
class UserRecord:
    """authpb.User: roles kept sorted, as etcd keeps them."""

    name: str
    password: str | None = ""  # None: not known (not recorded): any password matches
    roles: tuple[str, ...] = ()
    no_password: bool = False

    def describe(self) -> str:
        return f"{self.name}[{','.join(self.roles)}]"


@dataclass(frozen=True, slots=True)
class RoleRecord:
    """authpb.Role: permissions kept sorted by key, one per (key, range_end)."""

    name: str
    perms: tuple[Permission, ...] = ()

    def describe(self) -> str:
        return f"{self.name}{{{'; '.join(p.describe() for p in self.perms)}}}"


@dataclass(frozen=True, slots=True)
class AuthState:
    """The auth store: users and roles sorted by name."""

    enabled: bool = False
    revision: int = 1
    users: tuple[UserRecord, ...] = ()
    roles: tuple[RoleRecord, ...] = ()

    def user(self, name: str) -> UserRecord | None:
        for user in self.users:
            if user.name == name:
                return user
        return None

    def role(self, name: str) -> RoleRecord | None:
        for role in self.roles:
            if role.name == name:
                return role
        return None

    def is_root(self, name: str) -> bool:
        user = self.user(name)
        return user is not None and ROOT in user.roles

    def permissions_of(self, name: str) -> Iterator[Permission]:
        """Every permission of every role the user holds (none for an unknown user)."""
        user = self.user(name)
        if user is None:
            return
        for role_name in user.roles:
            role = self.role(role_name)
            if role is not None:
                yield from role.perms

    def permits(self, name: str, wanted: PermType, key: bytes, range_end: bytes) -> bool:
        """Whether `name` may READ or WRITE (`wanted`) every key of (key, range_end)."""
        if self.is_root(name):
            return True
        return covers(
            [p for p in self.permissions_of(name) if p.perm_type.grants(wanted)], key, range_end
        )

    def describe(self) -> str:
        state = "enabled" if self.enabled else "disabled"
        users = " ".join(u.describe() for u in self.users)
        roles = " ".join(r.describe() for r in self.roles)
        return f"auth {state} rev {self.revision} users [{users}] roles [{roles}]"


def _interval(key: bytes, range_end: bytes) -> tuple[bytes, bytes | None]:
    """The keys of (key, range_end) as [begin, end); end None means no end."""
    if not range_end:
        return key, key + b"\x00"
    if range_end == RANGE_END_ALL:
        return key, None
    return key, range_end


def _by_begin(interval: tuple[bytes, bytes | None]) -> tuple[bytes, bool, bytes]:
    """Sort key: by begin, then end (an open end last): None never meets bytes."""
    start, stop = interval
    return start, stop is None, stop or b""


def covers(perms: Iterable[Permission], key: bytes, range_end: bytes) -> bool:
    """Whether the permissions' key intervals together hold every key of (key, range_end)."""
    begin, end = _interval(key, range_end)
    intervals = sorted((_interval(p.key, p.range_end) for p in perms), key=_by_begin)
    if end is not None and end <= begin:
        # An empty or reversed range: etcd's interval tree visits the permissions that
        # hold its first key, and they contain it (etcd 3.5.1, compared by the tests).
        return any(start <= begin and (stop is None or begin < stop) for start, stop in intervals)
    reach: bytes | None = begin  # every key in [begin, reach) is covered; None: all
    for start, stop in intervals:
        if reach is None:
            return True
        if start > reach:
            break  # a gap at `reach` (later intervals start later still)
        if stop is None or stop > reach:
            reach = stop
        if reach is None or (end is not None and reach >= end):
            return True
    return reach is None


# ---------------------------------------------------------------------------- checks


def check_client(
    auth: AuthState, call: AsUser, lease_keys: Callable[[int], Iterable[bytes]]
) -> None:
    """Raise etcd's error if `call` (a KV or lease request) may not run; see the module
    docstring. `lease_keys(id)` gives the keys attached to a granted lease (none for an
    unknown one: that request fails later with its own error)."""
    if not auth.enabled:
        return
    for wanted, key, range_end in needed(call.request, lease_keys):  # type: ignore[arg-type]
        _check_caller(auth, call)  # per check, as etcd's isOpPermitted: none, none asked
        if not auth.permits(call.user, wanted, key, range_end):
            raise PermissionDeniedError(
                f"{call.user} may not {wanted.name} {show_range(key, range_end)}"
            )


def _check_caller(auth: AuthState, call: AsUser) -> None:
    if not call.user:
        raise UserEmptyError("the request carries no token; authenticate first")
    if call.auth_revision and call.auth_revision < auth.revision:
        raise AuthOldRevisionError(
            f"token checked at auth revision {call.auth_revision} < {auth.revision}"
        )
    if auth.user(call.user) is None:
        raise PermissionDeniedError(f"no user {call.user}")


def needed(
    request: Request, lease_keys: Callable[[int], Iterable[bytes]]
) -> Iterator[tuple[PermType, bytes, bytes]]:
    """(READ or WRITE, key, range_end) for every key range `request` touches."""
    read, write = PermType.READ, PermType.WRITE
    if isinstance(request, RangeRequest):
        yield read, request.key, request.range_end
    elif isinstance(request, PutRequest):
        yield write, request.key, b""
        if request.lease:
            for key in sorted(lease_keys(request.lease)):
                yield write, key, b""
        if request.prev_kv:
            yield read, request.key, b""
    elif isinstance(request, DeleteRangeRequest):
        yield write, request.key, request.range_end
        if request.prev_kv:
            yield read, request.key, request.range_end
    elif isinstance(request, TxnRequest):
        for compare in request.compare:
            yield read, compare.key, compare.range_end
        for op in request.success + request.failure:
            if isinstance(op, PutRequest):  # etcd 3.5: WRITE only (no prev_kv READ, no lease keys)
                yield write, op.key, b""
            else:
                yield from needed(op, lease_keys)
    elif isinstance(request, LeaseRevokeRequest):
        for key in sorted(lease_keys(request.id)):
            yield write, key, b""


def check_admin_call(auth: AuthState, call: AsUser) -> None:
    """Raise etcd's error if a client may not make the auth request `call` wraps."""
    if not auth.enabled:
        return
    request = call.request
    if isinstance(request, AuthenticateRequest):
        return
    if isinstance(request, AuthUserGetRequest) and request.name == call.user and call.user:
        return
    if isinstance(request, AuthRoleGetRequest):
        user = auth.user(call.user)
        if user is not None and request.role in user.roles:
            return
    if not call.user:
        raise UserEmptyError("an auth request without a token while auth is enabled")
    if auth.user(call.user) is None:
        raise UserNotFoundError(f"the token names {call.user}, who no longer exists")
    if not auth.is_root(call.user):
        raise PermissionDeniedError(f"{call.user} does not hold the root role")


# ---------------------------------------------------------------------------- changes


def _with_user(auth: AuthState, user: UserRecord) -> tuple[UserRecord, ...]:
    others = [u for u in auth.users if u.name != user.name]
    return tuple(sorted([*others, user], key=lambda u: u.name))


def _with_role(auth: AuthState, role: RoleRecord) -> tuple[RoleRecord, ...]:
    others = [r for r in auth.roles if r.name != role.name]
    return tuple(sorted([*others, role], key=lambda r: r.name))


def _need_user(auth: AuthState, name: str) -> UserRecord:
    user = auth.user(name)
    if user is None:
        raise UserNotFoundError(f"no user {name!r}")
    return user


def _need_role(auth: AuthState, name: str) -> RoleRecord:
    role = auth.role(name)
    if role is None:
        raise RoleNotFoundError(f"no role {name!r}")
    return role


def apply_auth(
    auth: AuthState, request: AuthRequest, revision: int
) -> tuple[AuthState, AuthResponse]:
    """Apply one auth request (already permitted); `revision` is the store's, for the
    response header. Raises StoreError and changes nothing when etcd refuses."""
    header = ResponseHeader(revision)
    if isinstance(request, AUTH_READ_TYPES):
        return auth, _read(auth, request, header)
    if isinstance(request, AuthenticateRequest):
        _authenticate(auth, request)
        return auth, AuthDoneResponse(header, "authenticate")
    new, method = _change(auth, request)
    return new, AuthDoneResponse(header, method)


def _read(auth: AuthState, request: AuthRequest, header: ResponseHeader) -> AuthResponse:
    if isinstance(request, AuthStatusRequest):
        return AuthStatusResponse(header, auth.enabled, auth.revision)
    if isinstance(request, AuthUserGetRequest):
        return AuthUserGetResponse(header, _need_user(auth, request.name).roles)
    if isinstance(request, AuthUserListRequest):
        return AuthUserListResponse(header, tuple(u.name for u in auth.users))
    if isinstance(request, AuthRoleGetRequest):
        return AuthRoleGetResponse(header, _need_role(auth, request.role).perms)
    if isinstance(request, AuthRoleListRequest):
        return AuthRoleListResponse(header, tuple(r.name for r in auth.roles))
    raise TypeError(f"{request!r} is not an auth read")


def _authenticate(auth: AuthState, request: AuthenticateRequest) -> None:
    if not auth.enabled:
        raise AuthNotEnabledError("enable auth before authenticating")
    user = auth.user(request.name)
    if user is not None and user.no_password:
        raise NoPasswordUserError(f"{request.name} was added without a password")
    known = user is not None and user.password is not None and request.password is not None
    if user is None or (known and user.password != request.password):
        raise AuthFailedError(f"no user {request.name!r} with that password")


def _bump(auth: AuthState, **changes: object) -> AuthState:
    return replace(auth, revision=auth.revision + 1, **changes)  # type: ignore[arg-type]


def _change(auth: AuthState, request: AuthRequest) -> tuple[AuthState, str]:
    if isinstance(request, AuthEnableRequest):
        if not auth.enabled:
            root = auth.user(ROOT)
            if root is None:
                raise RootUserNotExistError("add the user root (with the role root) first")
            if ROOT not in root.roles:
                raise RootRoleNotExistError("grant the role root to the user root first")
            auth = replace(auth, enabled=True)
        return auth, "auth_enable"
    if isinstance(request, AuthDisableRequest):
        if auth.enabled:
            auth = _bump(auth, enabled=False)
        return auth, "auth_disable"
    if isinstance(request, AuthUserAddRequest):
        if not request.name:
            raise UserEmptyError("give the user a name")
        if auth.user(request.name) is not None:
            raise UserAlreadyExistError(f"{request.name!r} exists")
        password = "" if request.no_password else request.password
        user = UserRecord(request.name, password, (), request.no_password)
        return _bump(auth, users=_with_user(auth, user)), "user_add"
    if isinstance(request, AuthUserDeleteRequest):
        if auth.enabled and request.name == ROOT:
            raise InvalidAuthMgmtError("the root user cannot be deleted while auth is enabled")
        _need_user(auth, request.name)
        users = tuple(u for u in auth.users if u.name != request.name)
        return _bump(auth, users=users), "user_delete"
    if isinstance(request, AuthUserChangePasswordRequest):
        user = _need_user(auth, request.name)
        changed = replace(user, password=request.password)
        return _bump(auth, users=_with_user(auth, changed)), "user_passwd"
    if isinstance(request, AuthUserGrantRoleRequest):
        user = _need_user(auth, request.user)
        if request.role != ROOT:
            _need_role(auth, request.role)
        if request.role in user.roles:
            return auth, "user_grant_role"  # etcd ignores a repeated grant
        changed = replace(user, roles=tuple(sorted((*user.roles, request.role))))
        return _bump(auth, users=_with_user(auth, changed)), "user_grant_role"
    if isinstance(request, AuthUserRevokeRoleRequest):
        if auth.enabled and request.name == ROOT and request.role == ROOT:
            raise InvalidAuthMgmtError("the root user must keep the root role")
        user = _need_user(auth, request.name)
        if request.role not in user.roles:
            raise RoleNotGrantedError(f"{request.name} does not hold {request.role}")
        changed = replace(user, roles=tuple(r for r in user.roles if r != request.role))
        return _bump(auth, users=_with_user(auth, changed)), "user_revoke_role"
    if isinstance(request, AuthRoleAddRequest):
        if not request.name:
            raise RoleEmptyError("give the role a name")
        if auth.role(request.name) is not None:
            raise RoleAlreadyExistError(f"{request.name!r} exists")
        return _bump(auth, roles=_with_role(auth, RoleRecord(request.name))), "role_add"
    if isinstance(request, AuthRoleDeleteRequest):
        if auth.enabled and request.role == ROOT:
            raise InvalidAuthMgmtError("the root role cannot be deleted while auth is enabled")
        _need_role(auth, request.role)
        roles = tuple(r for r in auth.roles if r.name != request.role)
        users = tuple(
            replace(u, roles=tuple(r for r in u.roles if r != request.role)) for u in auth.users
        )
        return _bump(auth, roles=roles, users=users), "role_delete"
    if isinstance(request, AuthRoleGrantPermissionRequest):
        role = _need_role(auth, request.name)
        if request.perm is None:
            raise PermissionNotGivenError("name a permission type and key")
        perm = request.perm
        others = [p for p in role.perms if (p.key, p.range_end) != (perm.key, perm.range_end)]
        perms = tuple(sorted([*others, perm], key=lambda p: (p.key, p.range_end)))
        return _bump(auth, roles=_with_role(auth, replace(role, perms=perms))), "role_grant"
    if isinstance(request, AuthRoleRevokePermissionRequest):
        role = _need_role(auth, request.role)
        where = (request.key, request.range_end)
        kept = tuple(p for p in role.perms if (p.key, p.range_end) != where)
        if len(kept) == len(role.perms):
            raise PermissionNotGrantedError(
                f"{request.role} holds no permission over "
                f"{show_range(request.key, request.range_end)}"
            )
        return _bump(auth, roles=_with_role(auth, replace(role, perms=kept))), "role_revoke"
    raise TypeError(f"apply_auth() got {request!r}, which is not an auth request")


def check_auth_invariants(auth: AuthState) -> Iterator[tuple[str, str]]:
    """(invariant, detail) for every broken invariant of the auth store.

    RootWhileEnabled: while enabled, the user root exists and holds the role root.
    AuthRevisionPositive: the auth revision is at least 1.
    UniqueNames: users and roles are sorted by name, each name once.
    RolesExist: every role a user holds (but root) is a role record.
    """
    if auth.revision < 1:
        yield "AuthRevisionPositive", f"auth revision {auth.revision}"
    if auth.enabled and not auth.is_root(ROOT):
        yield "RootWhileEnabled", auth.describe()
    for names in ([u.name for u in auth.users], [r.name for r in auth.roles]):
        if names != sorted(set(names)):
            yield "UniqueNames", ", ".join(names)
    known = {r.name for r in auth.roles} | {ROOT}
    for user in auth.users:
        missing = [r for r in user.roles if r not in known]
        if missing:
            yield "RolesExist", f"{user.name} holds {', '.join(missing)}"
