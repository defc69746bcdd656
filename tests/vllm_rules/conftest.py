"""Fixtures of the tests that ask an installed vLLM (`-m vllm`): the carried tile tables' writer,
and a device name vLLM's platform reports."""

from __future__ import annotations

import importlib.util
import os

import pytest

from support import ROOT


@pytest.fixture
def tile_tables_script():
    """benchmarks/vllm_tile_tables.py as a module (it writes the carried tile tables)."""
    spec = importlib.util.spec_from_file_location("vllm_tile_tables",
                                                  os.path.join(ROOT, "benchmarks", "vllm_tile_tables.py"))
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.fixture
def vllm_device(monkeypatch):
    """name_device(name, *cached): vLLM's platform reports `name` as the GPU, with vLLM's cached
    lookups that read it cleared (get_device_name_as_file_name and each of `cached`), and cleared
    again when the test ends."""
    from vllm.platforms import current_platform
    from vllm.utils.platform_utils import get_device_name_as_file_name

    caches = [get_device_name_as_file_name]

    def name_device(name: str, *cached) -> None:
        caches.extend(c for c in cached if c not in caches)
        monkeypatch.setattr(current_platform, "get_device_name", lambda device_id=0: name)
        for c in caches:
            c.cache_clear()

    yield name_device
    monkeypatch.undo()
    for c in caches:
        c.cache_clear()
