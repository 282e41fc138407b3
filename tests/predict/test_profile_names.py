"""Hardware names resolve exactly (issue #26, point 5): a profile's name, an alias or a device name of it, else a
one-line refusal with the nearest profiles; a desktop name never resolves to a laptop part."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.predict.profiles import (
    GIB,
    MAX_QUERY_CHARS,
    NEAREST_LIMIT,
    HardwareProfile,
    ProfileError,
    find_profile,
    load_profiles,
    match_nvml_name,
)


@pytest.fixture(scope="module")
def shipped() -> list[HardwareProfile]:
    return load_profiles()


def _refusal(query: str, profiles: list[HardwareProfile]) -> str:
    with pytest.raises(ProfileError) as exc:
        find_profile(query, profiles)
    msg = str(exc.value)
    assert "\n" not in msg and f'"{query}"' in msg
    return msg


def _offered(msg: str) -> list[str]:
    """The candidates a refusal lists after "did you mean: "."""
    assert "did you mean: " in msg, msg
    return msg.split("did you mean: ", 1)[1].split(", ")


def test_every_name_and_alias_of_every_shipped_profile_resolves_to_its_own_profile(
        shipped: list[HardwareProfile]) -> None:
    for p in shipped:
        for n in p.names():
            assert find_profile(n, shipped) is p, n
            assert find_profile(n.upper(), shipped) is p, n
            assert find_profile(f"  {n.lower()}  ", shipped) is p, n


def test_a_shipped_laptop_part_is_named_as_a_laptop_in_every_name(shipped: list[HardwareProfile]) -> None:
    """What keeps desktop names off laptop parts: no laptop profile has a name or alias without the word."""
    for p in shipped:
        if p.kind == "laptop":
            assert all("laptop" in n.casefold() for n in p.names()), p.name


@pytest.mark.parametrize(("query", "name"), [
    ("RTX 3070 Ti Laptop", "RTX 3070 Ti Laptop"),
    ("RTX 3070 Ti Laptop GPU", "RTX 3070 Ti Laptop"),
    ("NVIDIA GeForce RTX 3070 Ti Laptop GPU", "RTX 3070 Ti Laptop"),
    ("RTX 5070 Ti Laptop", "RTX 5070 Ti Laptop"),
    ("RTX 5060 Laptop GPU", "RTX 5060 Laptop"),
    ("RTX 3050 Laptop", "RTX 3050 Laptop"),
    ("RTX 3060 Laptop", "RTX 3060 Laptop"),
    ("rtx 4060 mobile", "RTX 4060 Laptop"),
    ("RTX 3080 Max-Q", "RTX 3080 Laptop"),
    # laptop queries only: the same words in any order, the series word optional
    ("4060 laptop", "RTX 4060 Laptop"),
    ("laptop 4060", "RTX 4060 Laptop"),
    ("3070 laptop", "RTX 3070 Laptop"),  # not the 3070 Ti Laptop: "ti" is a word of its name
    ("ti 3070 laptop", "RTX 3070 Ti Laptop"),
])
def test_laptop_names(shipped: list[HardwareProfile], query: str, name: str) -> None:
    assert find_profile(query, shipped).name == name


@pytest.mark.parametrize("query", ["RTX 3070 Ti", "NVIDIA GeForce RTX 3070 Ti", "RTX 5070 Ti",
                                   "NVIDIA GeForce RTX 5070 Ti", "RTX 5060", "RTX 3050", "GeForce RTX 3050"])
def test_a_desktop_name_never_gets_the_laptop_part(shipped: list[HardwareProfile], query: str) -> None:
    """There is no desktop profile of these cards: refused, the laptop part only offered."""
    if any(p.kind != "laptop" and query.casefold() in (n.casefold() for n in p.names()) for p in shipped):
        assert find_profile(query, shipped).kind != "laptop"  # a desktop profile of it was added since
        return
    offered = _offered(_refusal(query, shipped))
    laptop = query.removeprefix("NVIDIA ").removeprefix("GeForce ") + " Laptop"
    assert laptop in offered and len(offered) <= NEAREST_LIMIT


def test_desktop_and_laptop_of_one_number_are_different_profiles(shipped: list[HardwareProfile]) -> None:
    for number in ("4060", "4070", "4080", "4090", "5070", "5080", "5090", "3070", "3080"):
        desktop = find_profile(f"NVIDIA GeForce RTX {number}", shipped)
        laptop = find_profile(f"NVIDIA GeForce RTX {number} Laptop GPU", shipped)
        assert desktop.kind == "desktop" and laptop.kind == "laptop", number
        assert find_profile(f"RTX {number}", shipped) is desktop


def test_a_series_prefix_is_refused_with_candidates(shipped: list[HardwareProfile]) -> None:
    msg = _refusal("RTX 30", shipped)
    assert msg.startswith('no hardware profile "RTX 30" — did you mean: ')
    offered = _offered(msg)
    assert {"RTX 3060 12GB", "RTX 3070", "RTX 3080", "RTX 3090"} <= set(offered) and len(offered) <= NEAREST_LIMIT


def test_a_bare_number_is_refused(shipped: list[HardwareProfile]) -> None:
    assert set(_offered(_refusal("4060", shipped))) >= {"RTX 4060", "RTX 4060 Laptop", "RTX 4060 Ti 16GB"}
    assert "RX 7900 XTX" in _offered(_refusal("7900", shipped))[:3]  # with the RX 7900 XT and GRE beside it


def test_rx_7900_xt_is_not_the_xtx(shipped: list[HardwareProfile]) -> None:
    xtx = find_profile("RX 7900 XTX", shipped)
    assert find_profile("AMD Radeon RX 7900 XTX", shipped) is xtx
    assert find_profile("AMD Radeon RX 7900 XTX (RADV NAVI31)", shipped) is xtx  # a Vulkan device name
    if not any("RX 7900 XT" in p.names() for p in shipped):
        assert _offered(_refusal("RX 7900 XT", shipped))[0] == "RX 7900 XTX"
        assert _offered(_refusal("AMD Radeon RX 7900 XT", shipped))[0] == "RX 7900 XTX"
    else:
        assert find_profile("RX 7900 XT", shipped) is not xtx


def test_rtx_3060_is_the_12_gb_card_by_an_explicit_alias(shipped: list[HardwareProfile]) -> None:
    """The one memory size a bare "RTX 3060" means is written in the TOML, and shows in the profile's name."""
    gb12 = find_profile("RTX 3060", shipped)
    assert gb12.name == "RTX 3060 12GB" and "RTX 3060" in gb12.aliases
    assert find_profile("RTX 3060 12 GB", shipped) is gb12


def test_a_name_two_profiles_claim_is_refused_with_both(shipped: list[HardwareProfile]) -> None:
    gb12 = find_profile("RTX 3060 12GB", shipped)
    gb8 = replace(gb12, name="RTX 3060 8GB", vram_gib=8.0, memory_bus_bits=128, peak_bandwidth_gbps=240.0,
                  aliases=("NVIDIA GeForce RTX 3060",))  # a user's profile of the 8 GB card
    msg = _refusal("NVIDIA GeForce RTX 3060", [*shipped, gb8])
    assert "ambiguous" in msg and set(_offered(msg)) == {"RTX 3060 12GB", "RTX 3060 8GB"}


def test_nothing_close_and_bad_queries_are_one_line(shipped: list[HardwareProfile]) -> None:
    msg = _refusal("Voodoo 5", shipped)
    assert "did you mean" not in msg and "hardware/*.toml" in msg
    _refusal("NVIDIA", shipped)  # vendor words alone name nothing
    with pytest.raises(ProfileError, match="empty"):
        find_profile("  ", shipped)
    with pytest.raises(ProfileError, match=f"at most {MAX_QUERY_CHARS}"):
        find_profile("RTX " * 1000, shipped)
    with pytest.raises(ProfileError) as exc:
        find_profile("RTX\n30", shipped)
    assert "\n" not in str(exc.value)


def test_brand_words_are_dropped_on_both_sides(shipped: list[HardwareProfile]) -> None:
    """An AMD integrated GPU named as users and drivers write it (a profile built here: none may ship yet)."""
    rx = find_profile("RX 7900 XTX", shipped)
    igpu = replace(rx, name="Radeon 8060S", kind="unified", aliases=("AMD Radeon(TM) 8060S Graphics",))
    profiles = [*(p for p in shipped if p.name != "Radeon 8060S"), igpu]  # the built one stands in for a shipped one
    for query in ("Radeon 8060S", "AMD Radeon 8060S", "radeon 8060s graphics",
                  "AMD Radeon 8060S Graphics (RADV GFX1151)"):
        assert find_profile(query, profiles) is igpu, query
    assert _offered(_refusal("Radeon 8060", profiles))[0] == "Radeon 8060S"


@pytest.mark.parametrize(("device", "name"), [
    ("NVIDIA GeForce RTX 3070 Ti Laptop GPU", "RTX 3070 Ti Laptop"),
    ("NVIDIA GeForce RTX 4060 Laptop GPU", "RTX 4060 Laptop"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", "RTX 4070 Ti Super"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA H200", "H200"),
    ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "RX 7900 XTX"),
    ("Apple M1 Max", "Apple M1 Max"),
])
def test_device_names(shipped: list[HardwareProfile], device: str, name: str) -> None:
    found = match_nvml_name(device, shipped)
    assert found is not None and found.name == name


def _device(name: str, profiles: list[HardwareProfile], vram_bytes: int | None = None) -> str | None:
    found = match_nvml_name(name, profiles, vram_bytes)
    return found.name if found is not None else None


def test_device_names_that_are_not_a_profile(shipped: list[HardwareProfile]) -> None:
    desktop = match_nvml_name("NVIDIA GeForce RTX 3070 Ti", shipped)
    assert desktop is None or desktop.kind == "desktop"
    assert _device("NVIDIA L4", shipped) is None
    assert _device("", shipped) is None
    assert _device("laptop 4060", shipped) is None  # the loose laptop rule is for typed names only


def test_a_device_whose_memory_is_not_the_profiles_gets_no_profile(shipped: list[HardwareProfile]) -> None:
    """NVML names the 8 GB and the 12 GB RTX 3060 alike: the memory size tells them apart, and the 8 GB card is the
    profile whose name is the device's with its memory added; a memory size no profile of that name has gets none
    (issue #52: the 8 GB card took the 12 GB card's profile in the window and none in the CLI)."""
    assert _device("NVIDIA GeForce RTX 3060", shipped, 12288 * 2**20) == "RTX 3060 12GB"
    assert _device("NVIDIA GeForce RTX 3060", shipped, 8 * GIB) == "RTX 3060 8GB"
    assert _device("NVIDIA GeForce RTX 3060", shipped, 6 * GIB) is None
    assert _device("NVIDIA GeForce RTX 4060 Ti", shipped, 8 * GIB) == "RTX 4060 Ti 8GB"
    assert _device("NVIDIA GeForce RTX 3060 Ti", shipped, 8 * GIB) == "RTX 3060 Ti"  # "Ti" is a word, not a size
    assert _device("NVIDIA H200", shipped, 143771 * 2**20) == "H200"  # NVML's figure for the 141 GB part
