"""`qm2qm serve --loop`: the event loop is uvloop when installed, asyncio on request, and a bad choice is named."""
from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner

from qm2qm import eventloop
from qm2qm.cli import main
from qm2qm.config import ConfigError, load_config

from tests.product.conftest import Cli, start_server


def test_loop_defaults_to_auto_and_rejects_unknown_names(tmp_path):
    assert load_config().loop == "auto"
    assert load_config(None, {"loop": "asyncio"}).loop == "asyncio"
    path = tmp_path / "q.toml"
    path.write_text('loop = "trio"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="loop: expected one of auto, asyncio, uvloop, got 'trio'"):
        load_config(path)


def test_auto_picks_uvloop_exactly_when_it_is_importable(monkeypatch):
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: False)
    assert eventloop.resolve("auto") == "asyncio"
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: True)
    assert eventloop.resolve("auto") == "uvloop"


def test_explicit_uvloop_without_uvloop_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(eventloop, "uvloop_available", lambda: False)
    with pytest.raises(eventloop.EventLoopError, match="uvloop is not installed"):
        eventloop.resolve("uvloop")
    result = CliRunner().invoke(main, ["serve", "--data-dir", ":memory:", "--loop", "uvloop"])
    assert result.exit_code == 2 and "uvloop is not installed" in result.output


def test_run_uses_the_chosen_loop():
    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__
    assert eventloop.run(loop_module(), "asyncio").startswith("asyncio")
    if eventloop.uvloop_available():
        assert eventloop.run(loop_module(), "uvloop").startswith("uvloop")


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_serve_reports_the_loop_it_runs_on(tmp_path, choice):
    if choice == "uvloop" and not eventloop.uvloop_available():
        pytest.skip("uvloop has no build for this platform")
    server = start_server(tmp_path / "data", "--loop", choice)
    try:
        assert Cli(server.admin).json("info")["event_loop"] == choice
    finally:
        server.stop()


def test_settle_gc_freezes_what_is_alive_and_makes_collections_rarer():
    import gc
    before = gc.get_threshold()
    try:
        keep = [[] for _ in range(10)]      # containers alive when the server is up
        eventloop.settle_gc((12_345, 6, 7))
        assert gc.get_threshold() == (12_345, 6, 7)
        assert gc.get_freeze_count() >= len(keep)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_clear_gc_collects_start_up_garbage_before_the_store_loads():
    import gc
    import weakref

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a              # a cycle: only the collector frees it
    gone = weakref.ref(a)
    collecting = gc.isenabled()
    gc.disable()                         # no automatic pass may free it first
    try:
        del a, b
        assert gone() is not None
        eventloop.clear_gc()
        assert gone() is None
    finally:
        if collecting:
            gc.enable()


def test_settle_gc_freezes_without_collecting_a_heap_of_every_stored_message(monkeypatch):
    """A pass over 1,000,000 loaded messages takes 0.25 s; serve collects before the store loads (clear_gc)."""
    calls = []
    monkeypatch.setattr(eventloop.gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(eventloop.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(eventloop.gc, "set_threshold", lambda *a: calls.append("threshold"))
    eventloop.settle_gc()
    assert calls == ["freeze", "threshold"]
