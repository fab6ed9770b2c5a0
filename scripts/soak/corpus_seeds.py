"""Writes the seed conversations of tests/fuzz/corpus (issue 14): per interface and syntax, every seed stub sent
unmutated (``-valid``), a generated fuzz conversation, and one that starts with the interface's real open
(``-session``). Run: `python scripts/soak/corpus_seeds.py [interface ...]`."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from soak import fuzz, seeds, wire  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "fuzz" / "corpus"


def valid(entry: seeds.InterfaceSeeds, ndr64: bool, stateful: bool) -> fuzz.Conversation:
    """Every seed stub of every opnum as a plain request (the tail is the last one)."""
    conv = fuzz.Conversation(entry.name, entry.syntax, ndr64, stateful)
    call_id = 3
    for opnum, stubs in sorted(entry.build(ndr64).items()):
        for stub in stubs:
            call_id += 1
            conv.pdus.append(wire.request(call_id, 0, opnum, stub))
    return conv


def generated(entry: seeds.InterfaceSeeds, ndr64: bool, stateful: bool) -> fuzz.Conversation:
    rng = random.Random(14)
    gen = fuzz.Generator(fuzz.SeedBank([entry]), rng)
    while True:
        conv = gen.conversation()
        if conv.ndr64 == ndr64 and conv.stateful == stateful:
            return conv


def write(conv: fuzz.Conversation, name: str, found: str) -> None:
    (CORPUS / f"{name}.json").write_text(json.dumps(conv.to_json(found), indent=1) + "\n")


def main(names: list[str]) -> None:
    for entry in seeds.SEED_TABLE:
        if names and entry.name not in names:
            continue
        for ndr64 in (False, True):
            syntax = "ndr64" if ndr64 else "ndr"
            write(valid(entry, ndr64, entry.opener is not None), f"seed-{entry.name}-{syntax}-valid",
                  "seed: every seed stub, unmutated")
            write(generated(entry, ndr64, False), f"seed-{entry.name}-{syntax}",
                  "seed: a representative generated conversation")
            if entry.opener is not None:
                write(generated(entry, ndr64, True), f"seed-{entry.name}-{syntax}-session",
                      "seed: a representative generated conversation")


if __name__ == "__main__":
    main(sys.argv[1:])
