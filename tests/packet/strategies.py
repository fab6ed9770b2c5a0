"""Hypothesis strategies: Messages whose attributes a UserMessage Packet can carry (MS-MQDMPR 3.1.1.12)."""
from __future__ import annotations

import uuid

from hypothesis import strategies as st

from shared_adm.message import GUID_NULL, DeliveryGuarantee, Message

u32 = st.integers(0, 0xFFFFFFFF)
u16 = st.integers(0, 0xFFFF)
guids = st.uuids().filter(lambda g: g != GUID_NULL)
wchars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
bmp_wchars = st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",), blacklist_characters="\x00")
direct_names = st.text(wchars, min_size=1, max_size=40).map(lambda s: "DIRECT=" + s)


def public(g: uuid.UUID) -> str:
    return f"PUBLIC={g}"


def private(qm: uuid.UUID, number: int) -> str:
    return f"PRIVATE={qm}\\{number:08x}"


@st.composite
def messages(draw, transactional=None, security=None, multi=None) -> Message:
    """A Message with every packet-carried attribute drawn, consistent with MS-MQMQ 2.2.19–2.2.20 rules."""
    source, qma_other, other = draw(guids), draw(guids), draw(guids)
    m = Message(identifier=(source, draw(u32)), source_machine_identifier=source)
    dest_kind = draw(st.sampled_from(["none", "direct", "public", "private"]))
    qma = GUID_NULL
    if dest_kind == "direct":
        m.destination_queue_format_name = draw(direct_names)
    elif dest_kind == "public":
        qma = qma_other
        m.destination_queue_format_name = public(draw(guids))
    elif dest_kind == "private":
        qma = qma_other
        m.destination_queue_format_name = private(qma, draw(u32))
    m.destination_queue_manager_identifier = qma

    def queue(hosts: list[uuid.UUID]) -> str | None:
        kind = draw(st.sampled_from(["none", "direct", "public", "private"]))
        if kind == "direct":
            return draw(direct_names)
        if kind == "public":
            return public(draw(guids))
        if kind == "private":
            return private(draw(st.sampled_from(hosts)), draw(u32))
        return None

    hosts = [source, other] + ([qma] if qma != GUID_NULL else [])
    m.administration_queue_format_name = queue(hosts)
    if m.administration_queue_format_name is not None and draw(st.booleans()):
        m.response_queue_format_name = m.administration_queue_format_name
        m.response_queue_type = draw(st.sampled_from([None, 1]))
    else:
        m.response_queue_format_name = queue(hosts + [draw(guids)])
    if m.administration_queue_format_name is not None:
        m.acknowledgements_requested = draw(st.integers(0, 15))

    m.sent_time, m.time_to_reach_queue, m.time_to_be_received = draw(u32), draw(u32), draw(u32)
    m.positive_journaling_requested, m.negative_journaling_requested = draw(st.booleans()), draw(st.booleans())
    m.delivery_guarantee = draw(st.sampled_from(DeliveryGuarantee))
    m.priority = draw(st.integers(0, 7))
    m.class_ = draw(u16)
    m.label = draw(st.text(bmp_wchars, max_size=249))
    m.body = draw(st.binary(max_size=600))
    m.extension = draw(st.binary(max_size=40))
    m.body_type, m.application_tag = draw(u32), draw(u32)
    m.correlation_identifier = draw(st.binary(min_size=20, max_size=20))
    m.privacy_level = draw(st.sampled_from([0, 1, 3, 5]))
    m.hash_algorithm = draw(st.sampled_from([0x8001, 0x8002, 0x8003, 0x8004, 0x800C, 0x800E]))
    m.encryption_algorithm = draw(st.sampled_from([0x6602, 0x6801, 0x660E, 0x660F, 0x6610]))
    if draw(st.booleans()):
        m.connector_type_identifier = draw(guids)

    if transactional if transactional is not None else draw(st.booleans()):
        m.transaction_identifier = draw(st.integers(0, 0xFFFFF))
        m.delivery_guarantee = DeliveryGuarantee.RECOVERABLE
        m.priority = 0
        m.transactional_message_sequence_identifier = (draw(u32), draw(u32))
        m.transaction_sequence_number, m.transaction_previous_sequence_number = draw(u32), draw(u32)
        m.first_in_transaction, m.last_in_transaction = draw(st.booleans()), draw(st.booleans())
        m.final_ack_required = draw(st.booleans())
        m.connector_queue_manager_identifier = draw(st.none() | guids)

    if security if security is not None else draw(st.booleans()):
        m.sender_id_type = draw(st.sampled_from([0, 1, 2]))
        m.sender_id = draw(st.binary(min_size=1, max_size=68)) if m.sender_id_type else b""
        m.symmetric_key = draw(st.binary(max_size=40))
        m.signature = draw(st.binary(max_size=130))
        m.sender_certificate = draw(st.binary(max_size=300))
        m.authentication_provider_name = draw(st.text(bmp_wchars, max_size=30))
        m.authentication_provider_type = draw(u32) if m.authentication_provider_name else 1
        m.authentication_level = draw(st.sampled_from([0, 1, 3, 5]))
        if not (m.sender_id or m.symmetric_key or m.signature or m.sender_certificate
                or m.authentication_provider_name):
            m.signature = draw(st.binary(min_size=1, max_size=8))

    m.tracing_requested = draw(st.booleans())
    m.tracing_queue_identifier = draw(st.none() | guids)
    if draw(st.booleans()):
        m.soap_header = draw(st.none() | st.text(bmp_wchars, max_size=30))
        m.soap_body = draw(st.text(bmp_wchars, max_size=30))

    if multi if multi is not None else draw(st.booleans()):
        names = st.one_of(direct_names, guids.map(public),
                          st.tuples(guids, u32).map(lambda t: private(*t)), guids.map(lambda g: f"DL={g}"))
        m.destination_multi_queue_format_name = draw(st.lists(names, max_size=4))
        m.administration_multi_queue_format_name = draw(st.none() | st.lists(names, min_size=1, max_size=3))
        m.response_multi_queue_format_name = draw(st.none() | st.lists(names, min_size=1, max_size=3))
        m.multiple_destination_signature = draw(st.binary(max_size=40))
    return m
