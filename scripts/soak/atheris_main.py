"""`python atheris_main.py TARGET CORPUS_DIR [libFuzzer flags]`: coverage-guided fuzzing of one target with
atheris (libFuzzer); new inputs that add coverage go to CORPUS_DIR, a crash to crash-* in the work dir."""
from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["qm2qm", "shared_adm"]):
    from soak import targets


def main() -> None:
    target = targets.TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0]] + sys.argv[2:], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
