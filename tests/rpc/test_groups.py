"""Association groups (MS-RPCE 3.3.1.1.1, 3.3.1.5.7)."""
import random

from qm2qm.rpc.groups import GROUP_ID_MAX, GROUP_ID_MIN, AssociationGroups


def test_create_gives_unique_nonzero_windows_like_ids():
    groups = AssociationGroups(rng=random.Random(1))
    ids = {groups.create(i, "10.0.0.1").id for i in range(500)}
    assert len(ids) == 500 and 0 not in ids
    assert all(GROUP_ID_MIN <= i <= GROUP_ID_MAX for i in ids)


def test_ids_stay_unique_when_the_small_range_is_crowded():
    class Stuck(random.Random):
        """Always proposes the same candidate first, to force the retry path."""
        def randint(self, a, b):
            self.n = getattr(self, "n", 0) + 1
            return a if self.n % 3 else super().randint(a, b)
    groups = AssociationGroups(rng=Stuck(2))
    ids = [groups.create(i, "h").id for i in range(50)]
    assert len(set(ids)) == 50


def test_join_known_group_from_same_host():
    groups = AssociationGroups()
    g = groups.create(1, "10.0.0.1")
    assert groups.join(g.id, 2, "10.0.0.1") is g
    assert g.connections == {1, 2}


def test_join_unknown_or_foreign_host_is_refused():
    groups = AssociationGroups()
    g = groups.create(1, "10.0.0.1")
    assert groups.join(g.id + 1, 2, "10.0.0.1") is None
    assert groups.join(g.id, 2, "10.0.0.2") is None
    assert g.connections == {1}
    lax = AssociationGroups(check_host=False)
    h = lax.create(1, "10.0.0.1")
    assert lax.join(h.id, 2, "10.0.0.2") is h


def test_leave_reports_the_last_connection_once_and_forgets_the_id():
    groups = AssociationGroups()
    g = groups.create(1, "h")
    groups.join(g.id, 2, "h")
    assert groups.leave(g, 1) is False
    assert g.id in groups
    assert groups.leave(g, 2) is True
    assert g.id not in groups and groups.get(g.id) is None
    assert groups.leave(g, 2) is False
    assert groups.join(g.id, 3, "h") is None
