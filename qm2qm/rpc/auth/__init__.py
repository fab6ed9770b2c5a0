"""Authenticated connection-oriented DCE/RPC (MS-RPCE 2.2.1.1.7–8, 2.2.2.11–13, 3.3.1.5.2): policy, user file,
security contexts on pyspnego (NTLMSSP, SPNEGO; Kerberos with a keytab)."""
from qm2qm.rpc.auth.policy import AUTH_MODES, AuthPolicy
from qm2qm.rpc.auth.security import AuthError, SecurityContext, SecurityProvider
from qm2qm.rpc.auth.users import UserFileError, UserStore

__all__ = ["AUTH_MODES", "AuthPolicy", "AuthError", "SecurityContext", "SecurityProvider", "UserFileError",
           "UserStore"]
