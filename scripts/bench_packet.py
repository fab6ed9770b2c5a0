"""Benchmark of the UserMessage Packet codec (MS-MQDMPR 3.1.7.1.31–32); not a test, prints figures.

Run: .venv/bin/python scripts/bench_packet.py
"""
from __future__ import annotations

import argparse
import timeit
import uuid

from shared_adm import compact
from shared_adm.message import DeliveryGuarantee, Message
from shared_adm.packet import deserialize_message_from_buffer, serialize_message_to_buffer
from shared_adm.packet.compact_packet import serialize_compact
from shared_adm.packet.layout import MAX_PACKET_SIZE

SOURCE = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")


def message(body_size: int, **kw) -> Message:
    return Message(identifier=(SOURCE, 1), source_machine_identifier=SOURCE, sent_time=1700000000,
                   destination_queue_format_name="DIRECT=OS:host\\private$\\orders", label="order 42",
                   body=bytes(body_size), **kw)


def best(fn, number: int, repeat: int = 5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()     # --help, and no stray arguments
    cases = [
        ("1 KiB, minimal headers", message(1024), {}),
        ("1 KiB, transactional + sender SID + admin/response queues", message(
            1024, transaction_identifier=7, delivery_guarantee=DeliveryGuarantee.RECOVERABLE, priority=0,
            transactional_message_sequence_identifier=(1, 2), sender_id_type=1, sender_id=bytes(28),
            administration_queue_format_name="DIRECT=OS:host\\private$\\admin", acknowledgements_requested=5,
            response_queue_format_name=f"PRIVATE={SOURCE}\\00000003"), {}),
        ("largest body under PacketSize 0x400000", message(MAX_PACKET_SIZE - 220), {}),
        ("4 MiB body (max_packet_size raised)", message(4 << 20), {"max_packet_size": 8 << 20}),
    ]
    for name, m, kw in cases:
        packet = serialize_message_to_buffer(m, **kw)
        n = 20000 if len(packet) < 10000 else 50
        ser = best(lambda: serialize_message_to_buffer(m, **kw), n)
        de = best(lambda: deserialize_message_from_buffer(packet, **kw), n)
        unit, scale = ("us", 1e6) if ser < 1e-3 else ("ms", 1e3)
        print(f"{name:60s} {len(packet):>8d} B  serialize {ser * scale:8.2f} {unit}  "
              f"deserialize {de * scale:8.2f} {unit}")
    # a remote read starts from the queued compact form: unpack + serialize (the general path) against
    # serialize_compact (None: it leaves that message to the general path)
    for name, m, kw in cases[:2]:
        blob = compact.pack(m)
        limit = kw.get("max_packet_size", MAX_PACKET_SIZE)
        general = best(lambda: serialize_message_to_buffer(compact.unpack(blob), limit), 20000)
        fast = serialize_compact(blob, limit)
        took = f"{best(lambda: serialize_compact(blob, limit), 20000) * 1e6:8.2f} us" if fast else "general path"
        print(f"{name:60s} from the compact form: unpack + serialize {general * 1e6:8.2f} us  "
              f"serialize_compact {took}")
    print(f"{'a cursor walk: 100,000 distinct 100-byte messages, one pass':60s} serialize_compact "
          f"{distinct_walk(100_000) * 1e6:8.2f} us per message")


def distinct_walk(count: int, repeat: int = 5) -> float:
    """serialize_compact per message over ``count`` distinct compact forms (each its own identifier, label and
    times, as a queue filled by one sender holds them), each serialized once per pass: the best of ``repeat``."""
    forms = [compact.pack(Message(identifier=(SOURCE, i + 1), source_machine_identifier=SOURCE,
                                  destination_queue_manager_identifier=SOURCE, sent_time=1700000000 + i,
                                  arrival_time=1700000000 + i, lookup_identifier=(4 << 56) | i, label=f"m{i}",
                                  destination_queue_format_name="DIRECT=OS:host\\private$\\walk",
                                  body=bytes(range(100)))) for i in range(count)]

    def one_pass() -> None:
        for form in forms:
            serialize_compact(form, MAX_PACKET_SIZE)
    return best(one_pass, 1, repeat) / count


if __name__ == "__main__":
    main()
