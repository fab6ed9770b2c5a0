#!/usr/bin/env python3
"""Run Samba's DCE/RPC raw-protocol tests (samba.tests.dcerpc.raw_protocol, Debian python3-samba) against
`qm2qm serve`'s endpoint mapper listener, and print pass / fail counts (issue 10 item 6).

The tests hard-code port 135 and read SERVER, DOMAIN, REALM, USERNAME, PASSWORD and SMB_CONF_PATH from the
environment. This script starts `qm2qm serve` on loopback with an ephemeral --epm-port and a user file holding
those credentials, then runs the tests under the system Python (where python3-samba lives) with the port
rewritten in memory (nothing of Samba is copied or changed on disk).

    .venv/bin/python scripts/samba_raw_protocol.py                  # every test; counts + failing names
    .venv/bin/python scripts/samba_raw_protocol.py -k test_no_auth   # a subset (unittest -k pattern)
    .venv/bin/python scripts/samba_raw_protocol.py --kerberos       # + a loopback MIT KDC: the test_krb5_* too

--kerberos builds a throwaway realm (tests/rpc/krb5_realm.py: krb5kdc on 127.0.0.1, the tests' user, service
host/qm2qm-host in a keytab for serve --keytab) and points Samba's client at it (KRB5_CONFIG, TARGET_HOSTNAME:
Samba will not use Kerberos towards an IP address or "localhost").
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"
READY = re.compile(r"epm=[^\s:]+:(?P<port>\d+)")
CREDS = {"DOMAIN": "QM2QMTEST", "REALM": "QM2QMTEST.EXAMPLE", "USERNAME": "rawuser", "PASSWORD": "Raw-pass-123"}
KERBEROS_TARGET = "qm2qm-host"

# Run inside the system Python: point the tests' hard-coded 135 at our port, run, report one line per test.
DRIVER = r'''
import os, sys, unittest
from samba.tests.dcerpc import raw_testcase, raw_protocol
port = os.environ["QM2QM_EPM_PORT"]
connect_tcp = raw_testcase.RawDCERPCTest._connect_tcp
def _connect_tcp(self):
    if self.primary_address == "135":
        self.primary_address = port
    if self.secondary_address == "135":
        self.secondary_address = port
    return connect_tcp(self)
raw_testcase.RawDCERPCTest._connect_tcp = _connect_tcp
loader = unittest.TestLoader()
if len(sys.argv) > 1:
    loader.testNamePatterns = ["*%s*" % p for p in sys.argv[1:]]
suite = loader.loadTestsFromModule(raw_protocol)
class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test); print("PASS", test.id(), flush=True)
    def addFailure(self, test, err):
        super().addFailure(test, err); print("FAIL", test.id(), flush=True)
    def addError(self, test, err):
        super().addError(test, err); print("ERROR", test.id(), flush=True)
    def addSkip(self, test, reason):
        super().addSkip(test, reason); print("SKIP", test.id(), reason, flush=True)
runner = unittest.TextTestRunner(stream=open(os.environ["QM2QM_DETAILS"], "w"), resultclass=Result, verbosity=2)
runner.run(suite)
'''


def samba_available() -> bool:
    if not os.path.exists(SYSTEM_PYTHON):
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import samba.tests.dcerpc.raw_protocol"], capture_output=True)
    return probe.returncode == 0


def start_kerberos(directory: Path):
    """The loopback realm for --kerberos, or None (printing what is missing)."""
    sys.path.insert(0, str(REPO))
    from tests.rpc.krb5_realm import missing_prerequisites, start_realm
    missing = missing_prerequisites()
    if missing:
        print("--kerberos needs " + "; ".join(missing), file=sys.stderr)
        return None
    return start_realm(directory / "krb5", realm=CREDS["REALM"], user=CREDS["USERNAME"],
                       password=CREDS["PASSWORD"], service=f"host/{KERBEROS_TARGET}")


def epm_port() -> int:
    """135 when we may bind it (root, free): the tests also check the 4-byte "135" secondary address; else any."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", 135))
            return 135
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", "--pattern", action="append", default=[], help="run only tests matching (repeatable)")
    parser.add_argument("--details", default="/tmp/samba_raw_protocol.txt", help="unittest's verbose output")
    parser.add_argument("--kerberos", action="store_true", help="also run a loopback MIT KDC and serve --keytab")
    args = parser.parse_args()
    if not samba_available():
        print("python3-samba is not installed for /usr/bin/python3 (apt-get install python3-samba)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="qm2qm-samba-") as tmp:
        users = Path(tmp, "users.txt")
        users.write_text(f"{CREDS['DOMAIN']}:{CREDS['USERNAME']}:{CREDS['PASSWORD']}\n")
        users.chmod(0o600)
        smb_conf = Path(tmp, "smb.conf")
        smb_conf.write_text(f"[global]\n\tworkgroup = {CREDS['DOMAIN']}\n\trealm = {CREDS['REALM']}\n")
        port = epm_port()
        serve_args, krb_env, realm = [], {}, None
        if args.kerberos:
            realm = start_kerberos(Path(tmp))
            if realm is None:
                return 2
            serve_args = ["--keytab", realm.keytab]
            krb_env = {key: realm.env[key] for key in ("KRB5_CONFIG", "KRB5CCNAME")}
            krb_env["TARGET_HOSTNAME"] = KERBEROS_TARGET
        server = subprocess.Popen(
            [sys.executable, "-m", "qm2qm", "serve", "--data-dir", ":memory:", "--port", "0", "--admin-port", "0",
             "--epm-port", str(port), "--users", str(users), "--allow-anonymous-ntlm", *serve_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(REPO), env=dict(os.environ, **krb_env))
        try:
            line = server.stdout.readline()
            if READY.search(line) is None:
                print(f"qm2qm serve did not start: {line!r}", file=sys.stderr)
                return 2
            env = dict(os.environ, SERVER="127.0.0.1", SMB_CONF_PATH=str(smb_conf), QM2QM_EPM_PORT=str(port),
                       QM2QM_DETAILS=args.details, **CREDS, **krb_env)
            run = subprocess.run([SYSTEM_PYTHON, "-c", DRIVER, *args.pattern], env=env, capture_output=True,
                                 text=True, timeout=1800)
        finally:
            server.terminate()
            server.wait(timeout=60)
            if realm is not None:
                realm.stop()
    counts: dict[str, list[str]] = {"PASS": [], "FAIL": [], "ERROR": [], "SKIP": []}
    for out_line in run.stdout.splitlines():
        kind, _, name = out_line.partition(" ")
        if kind in counts:
            counts[kind].append(name.split(" ")[0].rsplit(".", 1)[-1])
    for kind in ("FAIL", "ERROR"):
        for name in counts[kind]:
            print(f"{kind.lower()}: {name}")
    if run.returncode and not any(counts.values()):
        print(run.stderr[-3000:], file=sys.stderr)
    if port != 135:
        print("note: port 135 was not available; tests checking the secondary address '135' fail for that reason")
    print(f"samba raw_protocol: {len(counts['PASS'])} passed, {len(counts['FAIL']) + len(counts['ERROR'])} failed, "
          f"{len(counts['SKIP'])} skipped (details: {args.details})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
