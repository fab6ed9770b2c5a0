"""A throwaway MIT Kerberos realm on loopback for the Kerberos tests: krb5.conf / kdc.conf in a temp dir, a KDC
(krb5kdc -n) on 127.0.0.1 at a free port, a user principal and a service keytab. Never reads /etc/krb5.conf."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REALM = "QM2QM.TEST"
SERVICE = "host/localhost"
USER = "alice"
PASSWORD = "Krb-Secret-123"
KDC_BINARIES = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "kvno")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_binary(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in _SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def missing_prerequisites() -> list[str]:
    """What is absent for a loopback realm: KDC binaries (Debian krb5-kdc, krb5-admin-server) and python-gssapi."""
    missing = [f"{name} (apt-get install krb5-kdc krb5-admin-server krb5-user)" for name in KDC_BINARIES
               if find_binary(name) is None]
    try:
        import gssapi  # noqa: F401
        import krb5  # noqa: F401      pyspnego's GSSAPI proxy needs both (its [kerberos] extra)
    except ImportError as exc:
        missing.append(f"the {exc.name} module (pip install -e '.[kerberos]'; builds against libkrb5-dev)")
    return missing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Realm:
    directory: Path
    port: int
    keytab: str
    env: dict[str, str]            # KRB5_CONFIG, KRB5_KDC_PROFILE, KRB5CCNAME for this realm
    process: subprocess.Popen
    name: str = REALM
    service: str = SERVICE

    def kinit(self, user: str = USER, password: str = PASSWORD) -> None:
        """A TGT for user in this realm's ccache, and a service ticket for SERVICE (impacket takes it from there:
        it asks a KDC only on port 88)."""
        for args in (["kinit", f"{user}@{self.name}"], ["kvno", self.service]):
            subprocess.run([find_binary(args[0]), *args[1:]], input=password + "\n", text=True, env=self.env,
                           check=True, capture_output=True, timeout=20)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def start_realm(directory: Path, *, realm: str = REALM, user: str = USER, password: str = PASSWORD,
                service: str = SERVICE) -> Realm:
    """Create the realm database, the user and the service principal (exported to a keytab); start the KDC."""
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    (directory / "krb5.conf").write_text(
        f"[libdefaults]\n default_realm = {realm}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
        f" rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n"
        f"[realms]\n {realm} = {{\n  kdc = 127.0.0.1:{port}\n }}\n"
        f"[domain_realm]\n localhost = {realm}\n")
    (directory / "kdc.conf").write_text(
        f"[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n"
        f"[realms]\n {realm} = {{\n  database_name = {directory}/principal\n"
        f"  key_stash_file = {directory}/stash\n  acl_file = {directory}/kadm5.acl\n"
        f"  kdc_listen = 127.0.0.1:{port}\n  kdc_tcp_listen = 127.0.0.1:{port}\n"
        f"  supported_enctypes = aes256-cts-hmac-sha1-96:normal\n }}\n"
        f"[logging]\n kdc = FILE:{directory}/kdc.log\n")
    (directory / "kadm5.acl").write_text("")
    env = dict(os.environ, KRB5_CONFIG=str(directory / "krb5.conf"), KRB5_KDC_PROFILE=str(directory / "kdc.conf"),
               KRB5CCNAME=f"FILE:{directory}/ccache", KRB5_TRACE="/dev/null")
    env.pop("KRB5_KTNAME", None)
    keytab = str(directory / "service.keytab")

    def run(*args: str) -> None:
        subprocess.run(list(args), env=env, check=True, capture_output=True, timeout=30)
    run(find_binary("kdb5_util"), "create", "-s", "-r", realm, "-P", "master-key-for-tests")
    kadmin = find_binary("kadmin.local")
    run(kadmin, "-r", realm, "-q", f"addprinc -pw {password} {user}")
    run(kadmin, "-r", realm, "-q", f"addprinc -randkey {service}")
    run(kadmin, "-r", realm, "-q", f"ktadd -k {keytab} {service}")
    process = subprocess.Popen([find_binary("krb5kdc"), "-n", "-r", realm], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"krb5kdc did not start (see {directory}/kdc.log)")
            time.sleep(0.05)
    return Realm(directory, port, keytab, env, process, realm, service)
