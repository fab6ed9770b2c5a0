"""Server authentication policy: mode, minimum level, anonymous NTLM (MS-RPCE 3.3.1.5.2; MS-MQQP 5; MS-MQMP 5.1)."""
from __future__ import annotations

import socket
from dataclasses import dataclass

from qm2qm.rpc.auth.users import UserStore
from qm2qm.rpc.interface import RPC_C_AUTHN_LEVEL_CONNECT, RPC_C_AUTHN_LEVEL_PKT_PRIVACY

AUTH_NONE, AUTH_OPTIONAL, AUTH_REQUIRED = "none", "optional", "required"
AUTH_MODES = (AUTH_NONE, AUTH_OPTIONAL, AUTH_REQUIRED)


def default_server_principal() -> str:
    """The name rpc_mgmt_inq_princ_name answers when none is configured: the host's machine account."""
    return socket.gethostname().split(".")[0].upper() + "$"


@dataclass
class AuthPolicy:
    """What the server accepts. ``none``: every authenticated bind is refused (bind_nak 8), as before this
    runtime had security providers; ``optional``: unauthenticated and authenticated binds both work;
    ``required``: an unauthenticated (or anonymous, or below ``min_level``) call to an interface with an
    authentication policy is answered with the interface's access-denied status."""
    mode: str = AUTH_OPTIONAL
    min_level: int = RPC_C_AUTHN_LEVEL_CONNECT
    allow_anonymous_ntlm: bool = False
    users: UserStore | None = None
    server_principal: str = ""
    keytab: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in AUTH_MODES:
            raise ValueError(f"auth mode {self.mode!r} is not one of {', '.join(AUTH_MODES)}")
        if not RPC_C_AUTHN_LEVEL_CONNECT <= self.min_level <= RPC_C_AUTHN_LEVEL_PKT_PRIVACY:
            raise ValueError(f"min auth level {self.min_level} is not in 2..6 (MS-RPCE 2.2.1.1.8)")
        if not self.server_principal:
            self.server_principal = default_server_principal()

    @property
    def accepts_authentication(self) -> bool:
        """True when authenticated binds are negotiated at all."""
        return self.mode != AUTH_NONE

    def call_allowed(self, authenticated: bool, auth_level: int) -> bool:
        """Whether a call passes the policy of an interface that has one (Interface.unauthenticated_opnums)."""
        if authenticated:
            return auth_level >= self.min_level
        return self.mode != AUTH_REQUIRED
