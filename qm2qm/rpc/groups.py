"""Association groups: creation, joining and lifetime (MS-RPCE 3.3.1.1.1, 3.3.1.5.7; C706 12.6.4.3)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from qm2qm.rpc.handles import MAX_CONTEXT_HANDLES, HandleTable

# Windows hands out small non-zero ids (captures show 16–20-bit values); any non-zero u32 is legal.
GROUP_ID_MIN = 0x00001000
GROUP_ID_MAX = 0x000FFFFF


@dataclass(eq=False)
class AssociationGroup:
    """One association (MS-RPCE 3.3.1.1.1): its id, its connections and its context handles."""
    id: int
    creator_host: str
    connections: set[int] = field(default_factory=set)
    handles: HandleTable = field(default_factory=HandleTable)


class AssociationGroups:
    """The server's table of live associations, keyed by assoc_group_id."""

    def __init__(self, *, rng: random.Random | None = None, check_host: bool = True,
                 max_context_handles: int = MAX_CONTEXT_HANDLES) -> None:
        self._groups: dict[int, AssociationGroup] = {}
        self.max_context_handles = max_context_handles
        self._rng = rng or random.SystemRandom()
        self.check_host = check_host

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, group_id: int) -> bool:
        return group_id in self._groups

    def snapshot(self) -> list[AssociationGroup]:
        """The live groups (a copy, for monitoring)."""
        return list(self._groups.values())

    def get(self, group_id: int) -> AssociationGroup | None:
        """The live group with this id, or None."""
        return self._groups.get(group_id)

    def create(self, connection_id: int, host: str) -> AssociationGroup:
        """bind with assoc_group_id 0: a new group with a fresh, unpredictable, non-zero id."""
        span = GROUP_ID_MAX - GROUP_ID_MIN + 1
        if len(self._groups) >= span // 2:
            # Crowded small space: fall back to the full u32 range rather than loop for long.
            lo, hi = GROUP_ID_MAX + 1, 0xFFFFFFFF
        else:
            lo, hi = GROUP_ID_MIN, GROUP_ID_MAX
        while True:
            group_id = self._rng.randint(lo, hi)
            if group_id not in self._groups:
                break
        group = AssociationGroup(group_id, host, handles=HandleTable(self.max_context_handles))
        group.connections.add(connection_id)
        self._groups[group_id] = group
        return group

    def join(self, group_id: int, connection_id: int, host: str) -> AssociationGroup | None:
        """bind with a non-zero assoc_group_id: the group joined, or None if unknown, dead or (MS-RPCE
        3.3.1.5.7, TCP: client IP address) opened from another machine."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        if self.check_host and host != group.creator_host:
            return None
        group.connections.add(connection_id)
        return group

    def leave(self, group: AssociationGroup, connection_id: int) -> bool:
        """Remove a connection; True when it was the last one (the group is then gone and must be run down)."""
        if connection_id not in group.connections:
            return False
        group.connections.discard(connection_id)
        if group.connections:
            return False
        if self._groups.get(group.id) is group:
            del self._groups[group.id]
        return True
