"""`python -m qm2qm` runs the `qm2qm` command (qm2qm.cli)."""
from qm2qm.cli import main

main(prog_name="qm2qm")
