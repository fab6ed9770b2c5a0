"""What the qm2qm handlers need to know about their server (MS-MQQP 3.1.4.8 ports, 3.1.4.9 version)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# MS-MQQP 3.1.4.8: IP_HANDSHAKE default port (qmcomm/qmcomm2, MS-MQMP).
DEFAULT_QMCOMM_PORT = 2103
# MS-MQQP 3.1.4.9 <22>-<24>: 6.1 is what Windows 7 / Server 2008 R2 and every later Windows report, with the
# OS build number (>= 6531); 20348 is Windows Server 2022's, the usual MSMQ host today.
DEFAULT_VERSION = (6, 1, 20348)


@dataclass
class MqqpConfig:
    """Ports and version the qm2qm interface reports.

    ``bound_port`` is the TCP port the qm2qm listener actually bound (IP_READ, 3.1.4.8); whoever starts
    the RpcServer sets it once the socket is bound (0 until then: RemoteQMGetQMQMServerPort answers 0,
    "the requested interface is otherwise unavailable")."""
    qmcomm_port: int = DEFAULT_QMCOMM_PORT
    bound_port: int = 0
    version: tuple[int, int, int] = DEFAULT_VERSION

    def __post_init__(self) -> None:
        for name, port in (("qmcomm_port", self.qmcomm_port), ("bound_port", self.bound_port)):
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 0xFFFF:
                raise ValueError(f"{name}: expected a TCP port 0..65535, got {port!r}")
        major, minor, build = self.version
        if not (0 <= major <= 0xFF and 0 <= minor <= 0xFF and 0 <= build <= 0xFFFF):
            raise ValueError(f"version: expected (u8, u8, u16), got {self.version!r}")

    @classmethod
    def from_server_config(cls, config: Any) -> "MqqpConfig":
        """From qm2qm.config.ServerConfig: its qmcomm_port, and its port when fixed (non-zero)."""
        return cls(qmcomm_port=config.qmcomm_port, bound_port=config.port)
