"""CLI commands for MS-MQSD discovery (``qm2qm discover``) and the embedded directory of MS-MQDMPR 3.1.7.1.18–24
(``qm2qm directory list|show|set|delete``). Exposed as ``discover_command`` and ``directory_group``.

Directory values on the command line: ``guid:<GUID>``, ``hex:<bytes>``, ``null``, a JSON literal
(``42``, ``true``, ``"text"``, ``[...]``), anything else is a string. Output with ``--json`` uses the tagged
forms of shared_adm.directory.encode_value (``{"$guid": ...}``, ``{"$hex": ...}``)."""
from __future__ import annotations

import asyncio
import json
import math
import uuid
from pathlib import Path
from typing import Any

import click

from qm2qm.mqsd.codec import MQSD_PORT
from shared_adm.directory import (OBJECT_TYPES, Directory, DirectoryObject, DirectoryOperationResult,
                                  DirectoryStoreError, SqliteDirectory, encode_value, equals)

DEFAULT_DATA_DIR = "./qm2qm-data"


def _fail(message: str, code: int = 1):
    click.echo(f"qm2qm: error: {message}", err=True)
    raise SystemExit(code)


def _guid(text: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip("{}"))
    except ValueError:
        _fail(f"{what}: {text!r} is not a GUID", 2)


# ---------------------------------------------------------------------------------------------- discover
@click.command("discover")
@click.option("--site", required=True, help="This client's Site.Identifier (GUID) sent as SiteID.")
@click.option("--enterprise", default=str(uuid.UUID(int=0)), show_default=True,
              help="Enterprise.Identifier (GUID) sent as EnterpriseID.")
@click.option("--network", "networks", multiple=True,
              help="Local address to broadcast from (repeatable) [all of the host's addresses].")
@click.option("--target", default="255.255.255.255", show_default=True,
              help="Where requests go: the broadcast address, or one server's address.")
@click.option("--port", type=click.IntRange(1, 65535), default=MQSD_PORT, show_default=True,
              help="MQSD server UDP port (MS-MQSD 2.1).")
@click.option("--timeout-ms", type=click.IntRange(1, 3_600_000), default=15_000, show_default=True,
              help="Wait For Response Timer (MS-MQSD 3.1.2.1).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def discover_command(site, enterprise, networks, target, port, timeout_ms, as_json) -> None:
    """Find MSMQ directory servers (MS-MQSD Get Directory Server List, 3.1.4.1)."""
    from qm2qm.mqsd.discovery import discover
    site_id, enterprise_id = _guid(site, "--site"), _guid(enterprise, "--enterprise")
    try:
        result = asyncio.run(discover(enterprise_id, site_id, networks=list(networks) or None, target=target,
                                      port=port, timeout_ms=timeout_ms))
    except OSError as exc:
        _fail(f"cannot use the network ({exc.strerror or exc})")
    data = {"success": result.success, "directory_servers": result.directory_server_list,
            "connected_networks": [str(g) for g in result.connected_network_identifier_list],
            "reason": result.reason}
    if as_json:
        click.echo(json.dumps(data, indent=2))
    elif result.success:
        click.echo("directory servers:  " + (", ".join(result.directory_server_list) or "(same site: none sent)"))
        click.echo("connected networks: " + ", ".join(data["connected_networks"]))
    if not result.success:
        if not as_json:
            click.echo(f"qm2qm: discovery failed: {result.reason}", err=True)
        raise SystemExit(1)


# ---------------------------------------------------------------------------------------------- directory
def parse_value(text: str) -> Any:
    """A directory attribute value from its command-line form (see the module docstring)."""
    if text.startswith("guid:"):
        return _guid(text[5:], "value")
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError:
            _fail(f"value {text!r}: not hex", 2)
    if text == "null":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not _finite(value):          # NaN, Infinity, 1e999: not JSON (Python's json reads them), so a string
        return text
    if isinstance(value, dict):
        _fail(f"value {text!r}: objects are not directory values", 2)
    return value


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return all(_finite(v) for v in value) if isinstance(value, list) else True


def _open(data_dir: str) -> Directory:
    try:
        return Directory(SqliteDirectory(Path(data_dir)))
    except DirectoryStoreError as exc:
        _fail(str(exc))


def _type(object_type: str) -> str:
    for known in OBJECT_TYPES:
        if known.lower() == object_type.lower():
            return known
    _fail(f"unknown object type {object_type!r}; one of {', '.join(OBJECT_TYPES)}", 2)


def _as_json(obj: DirectoryObject) -> dict:
    return {"type": obj.object_type, "identifier": str(obj.identifier),
            "attributes": {k: encode_value(v) for k, v in obj.attributes.items()}}


def _human(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return "hex:" + bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return "guid:" + str(value)
    return json.dumps(encode_value(value)) if not isinstance(value, str) else value


_data_dir = click.option("--data-dir", default=DEFAULT_DATA_DIR, show_default=True,
                         help="Data directory (or store file) holding the embedded directory.")
_json = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("directory")
def directory_group() -> None:
    """List and edit the embedded directory (MS-MQDMPR 3.1.7.1.18–24)."""


@directory_group.command("list")
@_data_dir
@click.option("--type", "object_type", help=f"Only this type ({', '.join(OBJECT_TYPES)}).")
@_json
def list_objects(data_dir, object_type, as_json) -> None:
    """List directory objects."""
    directory = _open(data_dir)
    try:
        objects = []
        for t in ([_type(object_type)] if object_type else OBJECT_TYPES):
            status, handle = directory.read_directory_begin(t)
            if status is not DirectoryOperationResult.SUCCESS:
                _fail(f"Read Directory Begin {t}: {status.value}")
            while True:
                status, obj = directory.read_directory_next(handle)
                if status is not DirectoryOperationResult.SUCCESS:
                    break
                objects.append(obj)
            directory.read_directory_end(handle)
    finally:
        directory.close()
    if as_json:
        click.echo(json.dumps([_as_json(o) for o in objects], indent=2))
        return
    for obj in objects:
        label = obj.attributes.get("Pathname") or obj.attributes.get("ComputerName") or ""
        click.echo(f"{obj.object_type:<14} {obj.identifier}  {label}".rstrip())


@directory_group.command("show")
@_data_dir
@click.argument("object_type")
@click.argument("identifier")
@_json
def show_object(data_dir, object_type, identifier, as_json) -> None:
    """Show one directory object (Read Directory, 3.1.7.1.20)."""
    directory = _open(data_dir)
    try:
        status, obj = directory.read_directory(_type(object_type), [equals("Identifier", _guid(identifier, "id"))])
    finally:
        directory.close()
    if status is not DirectoryOperationResult.SUCCESS:
        _fail(f"{object_type} {identifier}: {status.value}")
    if as_json:
        click.echo(json.dumps(_as_json(obj), indent=2))
        return
    click.echo(f"{obj.object_type} {obj.identifier}")
    for name in sorted(obj.attributes):
        click.echo(f"  {name} = {_human(obj.attributes[name])}")


@directory_group.command("set")
@_data_dir
@click.argument("object_type")
@click.argument("identifier")
@click.argument("assignments", nargs=-1, required=True)
@click.option("--create", is_flag=True, help="Create the object (Create Directory Object) instead of writing it.")
def set_object(data_dir, object_type, identifier, assignments, create) -> None:
    """Set attributes NAME=VALUE (Write Directory 3.1.7.1.24, or Create Directory Object 3.1.7.1.18)."""
    attributes = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(f"{item!r}: expected NAME=VALUE", 2)
        attributes[name] = parse_value(value)
    obj = DirectoryObject(_type(object_type), _guid(identifier, "id"), attributes)
    directory = _open(data_dir)
    try:
        status = directory.create_directory_object(obj)[0] if create else directory.write_directory(obj)
    finally:
        directory.close()
    if status is not DirectoryOperationResult.SUCCESS:
        _fail(f"{obj.object_type} {obj.identifier}: {status.value}")
    click.echo(f"{'created' if create else 'written'}: {obj.object_type} {obj.identifier}")


@directory_group.command("delete")
@_data_dir
@click.argument("object_type")
@click.argument("identifier")
def delete_object(data_dir, object_type, identifier) -> None:
    """Delete a directory object (Delete Directory Object, 3.1.7.1.19)."""
    directory = _open(data_dir)
    try:
        status = directory.delete_directory_object(DirectoryObject(_type(object_type), _guid(identifier, "id")))
    finally:
        directory.close()
    if status is not DirectoryOperationResult.SUCCESS:
        _fail(f"{object_type} {identifier}: {status.value}")
    click.echo(f"deleted: {object_type} {identifier}")
