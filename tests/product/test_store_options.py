"""`qm2qm serve --store-*`: the SQLite store's durability and group commit (shared_adm/store/sqlite.py) as settings."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from qm2qm.app import App
from qm2qm.cli import main
from qm2qm.config import ConfigError, load_config


def config(tmp_path, **values):
    return load_config(None, {"data_dir": str(tmp_path / "data"), "port": 0, "admin_port": 0, "epm_port": 0,
                              "qmcomm_port": 0, **values})


def test_defaults_are_the_stores_own():
    settings = load_config().store_options
    assert settings == {"synchronous": "NORMAL", "group_wait_ms": 1.0, "commit_interval_ms": 10.0}


def test_file_and_command_line_set_them(tmp_path):
    path = tmp_path / "qm2qm.toml"
    path.write_text('store_synchronous = "full"\nstore-group-wait-ms = 0\n', encoding="utf-8")
    settings = load_config(path, {"store_commit_interval_ms": 250}).store_options
    assert settings == {"synchronous": "FULL", "group_wait_ms": 0.0, "commit_interval_ms": 250.0}


@pytest.mark.parametrize("key, value, message", [
    ("store_synchronous", "off", r"store_synchronous: expected one of normal, full, got 'off'"),
    ("store_synchronous", "FULL", r"store_synchronous: expected one of normal, full"),
    ("store_group_wait_ms", -1, r"store_group_wait_ms: expected milliseconds 0..1000, got -1"),
    ("store_group_wait_ms", 1001, r"store_group_wait_ms: expected milliseconds 0..1000"),
    ("store_group_wait_ms", True, r"store_group_wait_ms: expected milliseconds"),
    ("store_commit_interval_ms", "5", r"store_commit_interval_ms: expected milliseconds 0..60000, got '5'"),
    ("store_commit_interval_ms", float("nan"), r"store_commit_interval_ms: expected milliseconds"),
])
def test_bad_values_name_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, {key: value})


def test_the_volatile_store_refuses_them():
    with pytest.raises(ConfigError, match=r"store_group_wait_ms: tunes the SQLite store, but data_dir ':memory:'"):
        load_config(None, {"data_dir": ":memory:", "store_group_wait_ms": 2})


async def test_the_server_opens_its_store_with_them(tmp_path):
    app = App(config(tmp_path, store_synchronous="full", store_group_wait_ms=3, store_commit_interval_ms=40))
    await app.start()
    try:
        assert app.store.options == {"synchronous": "FULL", "group_wait_ms": 3.0, "commit_interval_ms": 40.0}
        assert app.store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2      # FULL (NORMAL is 1)
    finally:
        await app.close()


def test_serve_names_a_bad_option():
    result = CliRunner().invoke(main, ["serve", "--data-dir", ":memory:", "--store-synchronous", "full"])
    assert result.exit_code == 2
    assert result.stderr == ("qm2qm: error: store_synchronous: tunes the SQLite store, "
                             "but data_dir ':memory:' is the volatile store\n")
    result = CliRunner().invoke(main, ["serve", "--store-group-wait-ms", "-3"])
    assert result.exit_code == 2 and "store_group_wait_ms: expected milliseconds 0..1000, got -3.0" in result.stderr
