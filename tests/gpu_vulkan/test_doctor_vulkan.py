"""``gguf-bench doctor`` on a Vulkan build of llama.cpp (Mesa's lavapipe where there is no GPU): the registry
names the Vulkan backend and its device, a software device is called so, and the doctor makes a CPU-type device
visible itself when the user has not set GGML_VK_VISIBLE_DEVICES."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import gguf_bench

pytestmark = pytest.mark.vulkan


def test_doctor_sees_the_vulkan_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)  # the doctor sets it for its own query
    done = gguf_bench("doctor", "--json", timeout=120)
    report = json.loads(done.stdout)
    llama, advice = report["llama_cpp"], report["advice"]
    assert {"Vulkan", "CPU"} <= set(llama["backends"]), llama
    vk = [d for d in llama["devices"] if d["backend"] == "Vulkan"]
    assert vk and all(d["type"] in ("GPU", "IGPU") and d["name"].startswith("Vulkan") for d in vk)
    assert all(d["memory_total_bytes"] > 0 for d in vk)
    soft = [d for d in vk if d["software"]]
    if soft and not report["machine_gpus"]["nvidia"]:  # lavapipe only: nothing to fix, the device named software
        assert llama["vk_visible_set_here"] is True and done.returncode == 0
        assert not any(a["level"] == "fix" for a in advice)
        assert any(a["command"] == f"export GGML_VK_VISIBLE_DEVICES={llama['vk_visible_devices']}" for a in advice)
        assert any("not a real GPU" in a["text"] for a in advice)
