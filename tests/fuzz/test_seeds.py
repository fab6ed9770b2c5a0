"""The soak fuzzer's seed table (scripts/soak/seeds.py): valid stubs, both syntaxes, every hosted interface, each
decoded by the server's own decoder where it has one."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from soak import seeds, seeds_qmcomm  # noqa: E402

from qm2qm.app import App  # noqa: E402
from qm2qm.config import load_config  # noqa: E402
from qm2qm.mqmp import codec as mqmp_codec  # noqa: E402
from qm2qm.mqmp.constants import OPNUM_NAMES as QMCOMM_OPNUMS, QMCOMM2_OPNUM_NAMES, SUPPORTING_SERVER_OPNUMS  # noqa: E402,E501
from qm2qm.mqqp import codec  # noqa: E402
from qm2qm.mqrr import codec as mqrr_codec  # noqa: E402
from qm2qm.mqrr.constants import OPNUM_NAMES as MQRR_OPNUMS  # noqa: E402

SYNTAXES = pytest.mark.parametrize("ndr64", [False, True], ids=["ndr", "ndr64"])


@SYNTAXES
def test_every_qm2qm_opnum_has_seeds_the_codec_decodes(ndr64):
    stubs = seeds._qm2qm(ndr64)
    assert sorted(stubs) == list(range(11))
    for opnum, items in stubs.items():
        assert items
        for stub in items:
            codec.decode_request(opnum, stub, ndr64)


@SYNTAXES
def test_every_qmcomm_opnum_a_client_may_send_has_seeds(ndr64):
    assert sorted(seeds_qmcomm.build_qmcomm(ndr64)) == sorted(QMCOMM_OPNUMS)
    assert sorted(seeds_qmcomm.build_qmcomm2(ndr64)) == sorted(QMCOMM2_OPNUM_NAMES)


@SYNTAXES
def test_hosted_qmcomm_seeds_decode_with_the_qmcomm_codec(ndr64):
    stubs = seeds_qmcomm.build_qmcomm(ndr64)
    for opnum in mqmp_codec.idl.OPNUMS:
        assert stubs[opnum]
        for stub in stubs[opnum]:
            mqmp_codec.decode_request(opnum, stub, ndr64)


@SYNTAXES
def test_gated_qmcomm_seeds_are_exactly_their_mqmp_6_declaration(ndr64):
    """The gate refuses before reading the stub (MS-MQMP 3.1.4), so the check is that each stub parses back, to
    its last byte, with the in-parameters MS-MQMP 6 gives the method."""
    stubs = seeds_qmcomm.build_qmcomm(ndr64)
    declared = {cls.opnum: cls for name, cls in vars(seeds_qmcomm).items()
                if isinstance(cls, type) and issubclass(cls, seeds_qmcomm.NDRCALL) and hasattr(cls, "opnum")
                and cls not in seeds_qmcomm.QMCOMM2_CALLS}
    assert sorted(declared) == sorted(SUPPORTING_SERVER_OPNUMS)
    for opnum, cls in declared.items():
        for stub in stubs[opnum]:
            assert cls(isNDR64=ndr64).fromString(stub) == len(stub), QMCOMM_OPNUMS[opnum]


@SYNTAXES
def test_qmcomm2_seeds_are_exactly_their_mqmp_6_declaration(ndr64):
    stubs = seeds_qmcomm.build_qmcomm2(ndr64)
    for cls in seeds_qmcomm.QMCOMM2_CALLS:
        for stub in stubs[cls.opnum]:
            assert cls(isNDR64=ndr64).fromString(stub) == len(stub), QMCOMM2_OPNUM_NAMES[cls.opnum]


@SYNTAXES
def test_every_mqrr_opnum_has_seeds_the_mqrr_codec_decodes(ndr64):
    stubs = seeds.by_name()["mqrr"].build(ndr64)
    assert sorted(stubs) == sorted(MQRR_OPNUMS)
    for opnum, items in stubs.items():
        assert items
        for stub in items:
            request = mqrr_codec.decode(opnum, stub, ndr64)
            assert request is not None


@SYNTAXES
def test_stateful_seeds_carry_the_placeholder_the_fuzzer_replaces(ndr64):
    qmcomm = seeds_qmcomm.build_qmcomm(ndr64)
    assert seeds.SESSION in qmcomm[3][0] and seeds.QUEUE_HANDLE_BYTES in qmcomm[4][0]
    mqrr = seeds.by_name()["mqrr"].build(ndr64)
    for opnum in (3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15):
        assert all(seeds.SESSION in stub for stub in mqrr[opnum]), opnum


@pytest.mark.parametrize("entry", seeds.SEED_TABLE, ids=[e.name for e in seeds.SEED_TABLE])
def test_every_entry_builds_seeds_in_both_syntaxes(entry):
    for ndr64 in (False, True):
        built = entry.build(ndr64)
        assert built and all(isinstance(s, bytes) for items in built.values() for s in items)


async def test_the_seed_table_covers_every_interface_qm2qm_serve_hosts(tmp_path):
    app = App(load_config(None, {"data_dir": ":memory:", "port": 0, "admin_port": 0, "epm_port": 0,
                                 "qmcomm_port": 0, "mqrr": True}))
    await app.start()
    try:
        hosted = {(str(u), major, minor) for (u, major, minor) in app.rpc.registry}
        hosted |= {(str(u), major, minor) for (u, major, minor) in app.qmcomm.registry}
    finally:
        await app.close()
    listeners = {entry.uuid: entry.listener for entry in seeds.SEED_TABLE}
    assert hosted - set(seeds.by_syntax()) == set()
    assert {listeners[u] for (u, _, _) in hosted} == {"rpc", "qmcomm"}
