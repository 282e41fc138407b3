"""Hardware profile table: every shipped profile validates; lookups; one-line validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.paths import HARDWARE_PROFILES_DIR
from app.predict.profiles import (
    GIB,
    HardwareProfile,
    ProfileError,
    cpu_profile,
    find_profile,
    load_profile_file,
    load_profiles,
    match_nvml_name,
)

REQUIRED_NAMES = [
    *(f"RTX {n} Laptop" for n in ("3050", "3060", "3070", "3070 Ti", "3080", "3080 Ti")),
    *(f"RTX {n} Laptop" for n in ("4050", "4060", "4070", "4080", "4090")),
    *(f"RTX {n} Laptop" for n in ("5060", "5070", "5070 Ti", "5080", "5090")),
    "RTX 3060 12GB", "RTX 3060 Ti", "RTX 3070", "RTX 3080", "RTX 3090", "RTX 4060", "RTX 4060 Ti 16GB", "RTX 4070",
    "RTX 4070 Ti Super", "RTX 4080", "RTX 4090", "RTX 5070", "RTX 5080", "RTX 5090", "RX 7900 XTX",
    *(f"Apple M{g}{v}" for g in "1234" for v in ("", " Pro", " Max")),
    "A100 80GB SXM", "H100 SXM", "H200",
]

GOOD_ENTRY = """
[[gpu]]
name = "Test GPU"
vendor = "NVIDIA"
kind = "laptop"
vram_gib = 8
memory_bus_bits = 128
memory_data_rate_gbps = 17.0
peak_bandwidth_gbps = {bw}
fp16_tensor_tflops = 50.0
power_limit_w = [35, 115]
aliases = ["NVIDIA Test GPU Laptop GPU"]
source = "made up for a test"
"""


@pytest.fixture(scope="module")
def shipped() -> list[HardwareProfile]:
    return load_profiles([HARDWARE_PROFILES_DIR])


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ shipped table


def test_every_shipped_file_loads_and_validates() -> None:
    files = sorted(HARDWARE_PROFILES_DIR.glob("*.toml"))
    assert len(files) >= 4
    for path in files:
        assert load_profile_file(path), f"{path} holds no [[gpu]] entries"


def test_shipped_table_covers_the_required_gpus(shipped: list[HardwareProfile]) -> None:
    names = {p.name for p in shipped}
    missing = [n for n in REQUIRED_NAMES if n not in names]
    assert not missing


def test_shipped_figures_are_consistent(shipped: list[HardwareProfile]) -> None:
    for p in shipped:
        assert p.source.strip(), p.name
        assert p.vram_bytes > 0 and p.fp16_tensor_tflops > 0, p.name
        if p.kind != "unified":
            assert p.peak_bandwidth_gbps == pytest.approx(p.bus_bandwidth_gbps, rel=0.02), p.name
        else:  # vendor figures are rounded down from the bus, never far from it
            assert p.peak_bandwidth_gbps == pytest.approx(p.bus_bandwidth_gbps, rel=0.05), p.name
        if p.kind == "laptop":
            assert p.power_limit_w is not None and p.power_limit_w[0] < p.power_limit_w[1], p.name
        assert p.path.startswith("profiles/hardware/"), p.path


def test_a_few_known_figures(shipped: list[HardwareProfile]) -> None:
    by_name = {p.name: p for p in shipped}
    assert by_name["RTX 4090"].peak_bandwidth_gbps == 1008.0
    assert by_name["RTX 4060 Laptop"].peak_bandwidth_gbps == 256.0  # 128 bit × 16 Gbps
    assert by_name["RTX 4060"].peak_bandwidth_gbps == 272.0  # 128 bit × 17 Gbps
    assert by_name["H200"].peak_bandwidth_gbps == 4800.0
    assert by_name["Apple M4 Max"].kind == "unified"


def test_names_and_aliases_are_unique(shipped: list[HardwareProfile]) -> None:
    seen: dict[str, str] = {}
    for p in shipped:
        for n in {n.casefold() for n in p.names()}:
            assert n not in seen, f"{n!r} used by {seen.get(n)} and {p.name}"
            seen[n] = p.name


# ------------------------------------------------------------------------------------------ lookups


def test_find_profile_by_name_alias_and_words(shipped: list[HardwareProfile]) -> None:
    assert find_profile("RTX 4060 Laptop", shipped).name == "RTX 4060 Laptop"
    assert find_profile("rtx 4060 laptop", shipped).name == "RTX 4060 Laptop"
    assert find_profile("4060 laptop", shipped).name == "RTX 4060 Laptop"
    assert find_profile("laptop 4060", shipped).name == "RTX 4060 Laptop"
    assert find_profile("NVIDIA GeForce RTX 4060 Laptop GPU", shipped).name == "RTX 4060 Laptop"
    assert find_profile("RTX 4060", shipped).name == "RTX 4060"  # exact beats substring
    assert find_profile("M1", shipped).name == "Apple M1"
    assert find_profile("m3 max", shipped).name == "Apple M3 Max"
    assert find_profile("RX 7900 XTX", shipped).name == "RX 7900 XTX"  # "7900" alone is refused (issue #26)


def test_find_profile_ambiguous_lists_candidates(shipped: list[HardwareProfile]) -> None:
    with pytest.raises(ProfileError, match="did you mean") as exc:
        find_profile("4060", shipped)
    msg = str(exc.value)
    assert "RTX 4060 Laptop" in msg and "RTX 4060 Ti 16GB" in msg and "\n" not in msg


def test_find_profile_no_match(shipped: list[HardwareProfile]) -> None:
    with pytest.raises(ProfileError, match='no hardware profile "Voodoo 5"'):
        find_profile("Voodoo 5", shipped)
    with pytest.raises(ProfileError):
        find_profile("  ", shipped)


def test_match_nvml_name(shipped: list[HardwareProfile]) -> None:
    assert match_nvml_name("NVIDIA GeForce RTX 4060 Laptop GPU", shipped).name == "RTX 4060 Laptop"
    assert match_nvml_name("NVIDIA GeForce RTX 4090", shipped).name == "RTX 4090"
    assert match_nvml_name("NVIDIA H200", shipped).name == "H200"
    assert match_nvml_name("NVIDIA A100-SXM4-80GB", shipped).name == "A100 80GB SXM"
    assert match_nvml_name("NVIDIA GeForce RTX 4060 Ti", shipped).name == "RTX 4060 Ti 16GB"
    assert match_nvml_name("NVIDIA H100 PCIe", shipped).name == "H100 PCIe"
    assert match_nvml_name("NVIDIA RTX 6000 Ada Generation", shipped).name == "RTX 6000 Ada"
    assert match_nvml_name("NVIDIA L4", shipped) is None
    assert match_nvml_name("NVIDIA GeForce GTX 1080", shipped) is None


# ------------------------------------------------------------------------------------------ validation


def test_good_entry_loads(tmp_path: Path) -> None:
    (p,) = load_profile_file(write(tmp_path, GOOD_ENTRY.format(bw=272.0)))
    assert p.name == "Test GPU" and p.power_limit_w == (35.0, 115.0) and p.vram_bytes == 8 * GIB
    assert p.aliases == ("NVIDIA Test GPU Laptop GPU",)
    assert p.to_json_dict()["peak_bandwidth_gbps"] == 272.0


def test_bandwidth_disagreeing_with_bus_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ENTRY.format(bw=300))
    with pytest.raises(ProfileError) as exc:
        load_profile_file(path)
    msg = str(exc.value)
    expected = "gpu 'Test GPU': peak_bandwidth_gbps 300 disagrees with bus 128 bit × 17 Gbps = 272.0"
    assert msg == f"{path}: {expected}"
    assert "\n" not in msg


def test_bandwidth_within_two_percent_is_accepted(tmp_path: Path) -> None:
    assert load_profile_file(write(tmp_path, GOOD_ENTRY.format(bw=276.0)))  # +1.5 %


def test_unified_memory_is_exempt_from_the_bus_check(tmp_path: Path) -> None:
    text = GOOD_ENTRY.format(bw=400.0).replace('kind = "laptop"', 'kind = "unified"')
    (p,) = load_profile_file(write(tmp_path, text))
    assert p.is_unified


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('vendor = "NVIDIA"', 'vendor = "NVIDIA"\ncolour = "green"', "unknown key 'colour'"),
        ('source = "made up for a test"', "", "missing key 'source'"),
        ("vram_gib = 8", 'vram_gib = "8"', "vram_gib must be a number"),
        ("vram_gib = 8", "vram_gib = true", "vram_gib must be a number"),
        ("memory_bus_bits = 128", "memory_bus_bits = 128.5", "memory_bus_bits must be an integer"),
        ("fp16_tensor_tflops = 50.0", "fp16_tensor_tflops = -1.0", "fp16_tensor_tflops must be positive"),
        ("vram_gib = 8", "vram_gib = 0", "vram_gib must be positive"),
        ('kind = "laptop"', 'kind = "phone"', "kind 'phone' is not one of"),
        ("power_limit_w = [35, 115]", "power_limit_w = [115, 35]", "power_limit_w must be [low, high]"),
        ("power_limit_w = [35, 115]", "power_limit_w = [35]", "power_limit_w must be [low, high]"),
        ('aliases = ["NVIDIA Test GPU Laptop GPU"]', 'aliases = "x"', "aliases must be an array"),
        ('aliases = ["NVIDIA Test GPU Laptop GPU"]', 'aliases = [""]', "aliases must be non-empty strings"),
        ('name = "Test GPU"', 'name = ""', "name must not be empty"),
    ],
)
def test_schema_errors_name_file_gpu_and_field(tmp_path: Path, old: str, new: str, expected: str) -> None:
    text = GOOD_ENTRY.format(bw=272.0)
    assert old in text
    path = write(tmp_path, text.replace(old, new))
    with pytest.raises(ProfileError) as exc:
        load_profile_file(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: gpu"), msg
    assert expected in msg, msg
    assert "\n" not in msg


def test_invalid_toml_and_bad_top_level(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile_file(write(tmp_path, "[[gpu]\nname = 1"))
    with pytest.raises(ProfileError, match="unknown top-level key 'cpu'"):
        load_profile_file(write(tmp_path, GOOD_ENTRY.format(bw=272.0) + "\n[[cpu]]\nname = 'x'\n"))
    with pytest.raises(ProfileError, match="must be an array of tables"):
        load_profile_file(write(tmp_path, "gpu = 3\n"))


def test_duplicate_names_are_rejected(tmp_path: Path) -> None:
    entry = GOOD_ENTRY.format(bw=272.0)
    with pytest.raises(ProfileError, match="already used"):
        load_profile_file(write(tmp_path, entry + entry))
    d = tmp_path / "dir"
    d.mkdir()
    write(d, entry, "a.toml")
    write(d, entry.replace('name = "Test GPU"', 'name = "Other GPU"'), "b.toml")  # same alias
    with pytest.raises(ProfileError, match="already used in"):
        load_profiles([d])


def test_later_dir_replaces_a_same_named_profile(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    write(user, GOOD_ENTRY.format(bw=272.0).replace('name = "Test GPU"', 'name = "RTX 4090"')
          .replace('aliases = ["NVIDIA Test GPU Laptop GPU"]', ""), "mine.toml")
    profiles = load_profiles([HARDWARE_PROFILES_DIR, user, tmp_path / "missing"])
    rtx = [p for p in profiles if p.name == "RTX 4090"]
    assert len(rtx) == 1 and rtx[0].peak_bandwidth_gbps == 272.0


def test_default_dirs_include_the_user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GGUF_WORKBENCH_DATA_DIR", str(tmp_path))
    (tmp_path / "hardware").mkdir()
    write(tmp_path / "hardware", GOOD_ENTRY.format(bw=272.0), "mine.toml")
    profiles = load_profiles()
    assert find_profile("Test GPU", profiles).path.endswith("mine.toml")
    assert find_profile("RTX 4060 Laptop", profiles).kind == "laptop"


def test_cpu_profile() -> None:
    p = cpu_profile("Ryzen 7 7840HS", bandwidth_gbps=60.0, gflops=800.0, ram_bytes=32 * GIB)
    assert p.kind == "cpu" and p.is_unified
    assert p.vram_bytes == 32 * GIB and p.peak_bandwidth_gbps == 60.0
    assert p.fp16_tensor_tflops == pytest.approx(0.8)
    with pytest.raises(ValueError):
        cpu_profile("x", 0.0, 1.0, 1)
