"""The qm2qm stub decoders and the UserMessage packet parser on fuzzed input (issue 14): the coverage corpus
scripts/soak.py keeps in tests/fuzz/coverage/, and a small-count hypothesis run; each input either decodes or
raises the documented error (RpcFault, MS-RPCE 3.1.1.5.3 / PacketError, MS-MQMQ 2.2.20) and nothing else."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from soak import targets  # noqa: E402

COVERAGE = Path(__file__).parent / "coverage"
CASES = [(t, p) for t in targets.TARGETS for p in sorted((COVERAGE / t).glob("*"))]
EXAMPLES = settings(max_examples=int(os.environ.get("QM2QM_FUZZ_EXAMPLES", "200")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_the_coverage_corpus_has_inputs_beyond_the_seeds(target):
    files = list((COVERAGE / target).glob("*"))
    assert len([f for f in files if not f.name.startswith("seed-")]) > 0


@pytest.mark.parametrize("target, path", CASES, ids=[f"{t}-{p.name}" for t, p in CASES])
def test_corpus_input_decodes_or_raises_its_documented_error(target, path):
    targets.TARGETS[target](path.read_bytes())


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_seed_inputs_decode(target):
    for data in targets.seed_inputs(target):
        targets.TARGETS[target](data)


@pytest.mark.parametrize("target", ["stub", "qmcomm_stub", "mqrr_stub"])
def test_random_stubs_decode_or_fault(target):
    @EXAMPLES
    @given(st.binary(max_size=512))
    def decode(data):
        targets.TARGETS[target](data)
    decode()


@pytest.mark.parametrize("target", ["qmcomm_stub", "mqrr_stub"])
def test_mutated_seed_stubs_decode_or_fault(target):
    @EXAMPLES
    @given(st.data())
    def decode(data):
        seed = data.draw(st.sampled_from(targets.seed_inputs(target)))
        pos = data.draw(st.integers(1, len(seed)))
        patch = data.draw(st.binary(max_size=8))
        targets.TARGETS[target](seed[:pos] + patch + seed[pos + len(patch):])
    decode()


def test_the_mqrr_target_finds_a_direct_name_that_is_not_utf16():
    """The case the conversation fuzzer found (R_OpenQueue with an unpaired surrogate) decodes or faults."""
    seed = next(s for s in targets.seed_inputs("mqrr_stub") if s[0] == targets.MQRR_OPNUMS.index(2)
                and "soak-seed".encode("utf-16le") in s)
    targets.decode_mqrr_stub(seed.replace("soak-seed".encode("utf-16le")[:4], b"\x00\xd8s\x00"))


@EXAMPLES
@given(st.binary(max_size=2048))
def test_random_buffers_parse_or_raise_packet_error(data):
    targets.parse_packet(data)


@EXAMPLES
@given(st.data())
def test_mutated_packets_parse_or_raise_packet_error(data):
    seed = data.draw(st.sampled_from(targets.seed_inputs("packet")))
    pos = data.draw(st.integers(0, len(seed)))
    patch = data.draw(st.binary(max_size=8))
    targets.parse_packet(seed[:pos] + patch + seed[pos + len(patch):])
