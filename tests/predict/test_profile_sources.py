"""Every shipped hardware profile says where its figures come from (issue #26, point 4): a non-empty source, and a
source_url (the page or repository file at a commit the figures were read from) on at least SOURCE_URL_FLOOR of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import SOURCE_URL_PATTERN, HardwareProfile, ProfileError, load_profile_file, load_profiles

#: How many shipped profiles carry a source_url now; a change that drops one below this fails.
SOURCE_URL_FLOOR = 134
#: How many profiles ship now (issue #26 asks for at least 120).
PROFILE_FLOOR = 156

ENTRY = """
[[gpu]]
name = "Test GPU"
vendor = "NVIDIA"
kind = "desktop"
vram_gib = 8
memory_bus_bits = 128
memory_data_rate_gbps = 16.0
peak_bandwidth_gbps = 256.0
fp16_tensor_tflops = 50.0
source = "made up for a test"
source_url = "{url}"
"""


@pytest.fixture(scope="module")
def shipped() -> list[HardwareProfile]:
    return load_profiles([HARDWARE_PROFILES_DIR])


def test_every_shipped_profile_names_a_source(shipped: list[HardwareProfile]) -> None:
    assert len(shipped) >= PROFILE_FLOOR
    assert all(p.source.strip() for p in shipped)


def test_source_urls_never_decrease_and_are_well_formed(shipped: list[HardwareProfile]) -> None:
    cited = [p for p in shipped if p.source_url]
    assert len(cited) >= SOURCE_URL_FLOOR, f"{len(cited)} profiles have a source_url, fewer than {SOURCE_URL_FLOOR}"
    for p in cited:
        assert SOURCE_URL_PATTERN.fullmatch(p.source_url), (p.name, p.source_url)
        if p.source_url.startswith("github:"):  # a repository file is cited at one commit, with its entry named
            assert "entry" in p.source, p.name


def test_the_families_issue_26_names_are_profiled_and_cited(shipped: list[HardwareProfile]) -> None:
    by_name = {p.name: p for p in shipped}
    for name in ("RTX 2070 Laptop", "RTX 2080 Ti", "Tesla P40", "RTX 3090 Ti", "RTX 4080 Super", "RTX 3070 Ti",
                 "RTX 5070 Ti", "RTX 5060", "RTX 3050 8GB", "Arc A770 16GB", "RX 6800 XT", "RX 7900 XT", "RX 9070 XT"):
        assert by_name[name].source_url, name
    assert by_name["RTX 3070 Ti"].kind == "desktop" and by_name["RTX 3070 Ti"].peak_bandwidth_gbps == 608.3
    assert by_name["RX 7900 XT"].peak_bandwidth_gbps == 800.0


@pytest.mark.parametrize("url", [
    "https://www.allround-pc.com/news/2019/x",
    "github:voidful/gpu-info-api@03a6b34a8cc7b761a0b70a5956a478c76062e6ec:gpu.json",
])
def test_good_source_urls_load(tmp_path: Path, url: str) -> None:
    path = tmp_path / "x.toml"
    path.write_text(ENTRY.format(url=url), encoding="utf-8")
    assert load_profile_file(path)[0].source_url == url


@pytest.mark.parametrize("url", [
    "http://example.com/page",  # not https
    "www.techpowerup.com/gpu-specs/",  # no scheme
    "github:voidful/gpu-info-api:gpu.json",  # no commit
    "github:voidful/gpu-info-api@03a6b34:gpu.json",  # a short commit
    "https://example.com/a page",  # whitespace
    "",
])
def test_bad_source_urls_are_refused_in_one_line(tmp_path: Path, url: str) -> None:
    path = tmp_path / "x.toml"
    path.write_text(ENTRY.format(url=url), encoding="utf-8")
    with pytest.raises(ProfileError, match="source_url must be") as exc:
        load_profile_file(path)
    assert "\n" not in str(exc.value) and "x.toml" in str(exc.value)
