"""The soak fuzzer's seed table (scripts/soak/seeds.py): valid stubs, both syntaxes, every hosted interface."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from soak import seeds  # noqa: E402

from qm2qm.app import App  # noqa: E402
from qm2qm.config import load_config  # noqa: E402
from qm2qm.mqqp import codec  # noqa: E402


@pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])
def test_every_qm2qm_opnum_has_seeds_the_codec_decodes(ndr64):
    stubs = seeds._qm2qm(ndr64)
    assert sorted(stubs) == list(range(11))
    for opnum, items in stubs.items():
        assert items
        for stub in items:
            codec.decode_request(opnum, stub, ndr64)


@pytest.mark.parametrize("entry", seeds.SEED_TABLE, ids=[e.name for e in seeds.SEED_TABLE])
def test_every_entry_builds_seeds_in_both_syntaxes(entry):
    for ndr64 in (False, True):
        built = entry.build(ndr64)
        assert built and all(isinstance(s, bytes) for items in built.values() for s in items)


async def test_the_seed_table_covers_every_interface_qm2qm_serve_hosts(tmp_path):
    app = App(load_config(None, {"data_dir": ":memory:", "port": 0, "admin_port": 0, "epm_port": 0}))
    await app.start()
    try:
        hosted = {(str(u), major, minor) for (u, major, minor) in app.rpc.registry}
    finally:
        await app.close()
    assert hosted - set(seeds.by_syntax()) == set()
