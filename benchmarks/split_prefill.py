"""Expected prefill of split placements and of a laptop GPU's power states, beside what was published (issue #53
items 3 and 5). Nothing printed here is fitted to these rows.

1. Split placements (``-ncmoe``) on desktop GPUs, from public llama-bench posts: ``predict --hw GPU -ncmoe N -ub U``
   on a header-only GGUF of the same model (tests/arch_ggufs.py shapes), its expected prefill and band beside the
   published figure, whether the figure lies in the band, and the ceiling the split showed before (compute only).
   Posts measured on a laptop GPU or a MacBook are held out of this workbench's data (issue #53) and are not used.
2. The power sweeps app/predict/power.py reads (profiles/power/power_sweeps.toml), as the factor it gives at each
   point: the data itself, to show what a share of board power carries.
3. The held-out check of the battery: an RTX 5090 Laptop's published decode on AC at 95 W and on battery at 55 W
   (alejp1998/containerz, held out by issue #53): the expected ratio and band beside the published one.

    python benchmarks/split_prefill.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model.gguf_facts import read_model_facts  # noqa: E402
from app.predict.answer import Machine, answer  # noqa: E402
from app.predict.power import power_scale, power_sweeps  # noqa: E402
from app.predict.profiles import find_profile, load_profiles  # noqa: E402
from app.predict.settings import PredictSettings  # noqa: E402
from tests.arch_ggufs import _attn_keys, _Builder, write_header_only_gguf  # noqa: E402


def _gpt_oss_120b(b: _Builder) -> None:
    """gpt-oss-120b's tensors (OpenAI's config: 36 layers, 128 experts, 4 used, width 2880) as arch_ggufs lays out
    gpt-oss-20b's: attention and the rest in the builder's matrix type, experts MXFP4."""
    E, H, KV, D, n_exp, Fe, V = 2880, 64, 8, 64, 128, 2880, 201088
    b.embd(E, V)
    for i in range(36):
        p = f"blk.{i}."
        b.attn(i, E, H, KV, D, bias=True)
        b.t(p + "attn_output.bias", E)
        b.t(p + "attn_sinks.weight", H)
        b.t(p + "post_attention_norm.weight", E)
        b.moe(i, E, Fe, n_exp, norm=False, expert_type="MXFP4")
        b.t(p + "ffn_gate_inp.bias", n_exp)
        for part in ("gate", "up", "down"):
            b.t(p + f"ffn_{part}_exps.bias", Fe if part != "down" else E, n_exp, kind="F32")


def write_gpt_oss_120b_f16(folder: Path) -> Path:
    keys = _attn_keys(36, 2880, 64, 8, 2880, 201088, 131072, Dk=64, expert_count=128, expert_used_count=4,
                      expert_feed_forward_length=2880, attention__sliding_window=128)
    b = _Builder("F16")
    _gpt_oss_120b(b)
    return write_header_only_gguf(folder / "gpt-oss-120b-F16.gguf", "gpt-oss", keys, b.tensors, name="gpt-oss-120b")


@dataclass(frozen=True)
class Published:
    """One published llama-bench figure of a split placement on a desktop GPU."""

    gpu: str
    model: str
    n_cpu_moe: int
    n_ubatch: int
    n_prompt: int
    prefill_tps: float
    source: str


#: An RTX 3090 (24 GB, desktop) running gpt-oss-120b-F16.gguf with -ncmoe raised as -ub grew to fit; llama-bench,
#: pp4096 for the first four rows, pp8192 for the last (the post's own note).
RTX_3090_UB_SWEEP = "https://ai-maestro.online/drastically-improve-prompt-processing-speed-for-n-cpu-moe-partially-" \
                    "offloaded-models-8/ (a Reddit post, 'Bigger ubatch made gpt-oss-120b prompt processing much " \
                    "faster on my RTX 3090')"
PUBLISHED = (
    Published("RTX 3090", "gpt-oss-120b-F16", 25, 256, 4096, 240.03, RTX_3090_UB_SWEEP),
    Published("RTX 3090", "gpt-oss-120b-F16", 26, 512, 4096, 380.27, RTX_3090_UB_SWEEP),
    Published("RTX 3090", "gpt-oss-120b-F16", 25, 2048, 4096, 1112.54, RTX_3090_UB_SWEEP),
    Published("RTX 3090", "gpt-oss-120b-F16", 26, 4096, 4096, 1682.47, RTX_3090_UB_SWEEP),
    Published("RTX 3090", "gpt-oss-120b-F16", 28, 8192, 8192, 2090.68, RTX_3090_UB_SWEEP),
)

#: The held-out battery reading (issue #53 holds alejp1998/containerz out: a check, never data): an RTX 5090 Laptop
#: (Lenovo Legion Pro 7), gpt-oss-20b Q4_K_M in llama.cpp, four generation tests each on AC capped at 95 W and on
#: battery capped at 55 W, its memory clock 14001 then 9001 MHz.
BATTERY_CHECK = {"gpu": "RTX 5090 Laptop", "ac_w": 95.0, "battery_w": 55.0,
                 "ac_tps": (143.05, 134.68, 134.34, 145.37), "battery_tps": (112.49, 87.90, 97.24, 97.41),
                 "source": "github:alejp1998/containerz@805369594acde7fc69b3d9b3a3bf2a774260e190:"
                           "RTX-5090-POWER-ANALYSIS.md (held out)"}


def split_rows(folder: Path, machine: Machine) -> None:
    facts = read_model_facts(write_gpt_oss_120b_f16(folder))
    profiles = load_profiles()
    print("1. Split placements on desktop GPUs: expected prefill against published llama-bench figures")
    print(f"{'GPU':<10} {'model':<18} {'-ncmoe':>6} {'-ub':>5} {'test':>7}  {'published':>9}  "
          f"{'expected (band)':<26} {'in band':<7} {'error':>6}  {'ceiling':>8}  {'before':>8}")
    errors, inside = [], 0
    for p in PUBLISHED:
        profile = find_profile(p.gpu, profiles)
        s = PredictSettings(n_ctx=p.n_prompt + 256, n_prompt=p.n_prompt, n_gen=0, n_ubatch=p.n_ubatch,
                            n_cpu_moe=p.n_cpu_moe, flash_attn=True)
        got = answer(facts, profile, s, machine)
        fig = got.prefill
        assert fig is not None
        compute_only = answer(facts, replace(profile, pcie_gen=None, pcie_lanes=None, pcie_source=""), s,
                              Machine()).prediction.prefill_ceiling_tps
        ok = fig.low is not None and fig.high is not None and fig.low <= p.prefill_tps <= fig.high
        inside += ok
        err = fig.value / p.prefill_tps - 1
        errors.append(abs(err))
        band = f"{fig.value:,.0f} ({fig.low or 0:,.0f}-{fig.high or 0:,.0f}) {fig.kind}"
        print(f"{p.gpu:<10} {p.model:<18} {p.n_cpu_moe:>6} {p.n_ubatch:>5} {'pp' + str(p.n_prompt):>7}  "
              f"{p.prefill_tps:>9,.0f}  {band:<26} {'yes' if ok else 'no':<7} {err:>+6.0%}  "
              f"{got.prediction.prefill_ceiling_tps:>8,.0f}  {compute_only:>8,.0f}")
    print(f"   {len(PUBLISHED)} rows: median |error| {statistics.median(errors):.0%}, {inside} of {len(PUBLISHED)} "
          f"inside their band; 'before' is the split's ceiling as it was shown (compute only, no copies)")
    print(f"   source: {RTX_3090_UB_SWEEP}")
    print()


def sweep_rows() -> None:
    print("2. The power sweeps the power model reads (its data, not a check): share of the rate at board power")
    for s in power_sweeps():
        points = ", ".join(f"{x:.0%}: {y:.2f}" for x, y in s.shares)
        print(f"   {s.gpu} {s.phase}: {points}  ({s.url})")
    laptop = find_profile("RTX 4060 Laptop", load_profiles())
    for watts in (35.0, 60.0, 80.0, 115.0):
        scale = power_scale(replace(laptop, power_limit_set_w=watts))
        if scale is not None:
            print(f"   RTX 4060 Laptop at {watts:>4.0f} W: prefill x{scale.prefill:.2f} "
                  f"({scale.prefill_low:.2f}-{scale.prefill_high:.2f}), decode x{scale.decode:.2f} "
                  f"({scale.decode_low:.2f}-{scale.decode_high:.2f})")
    print()


def battery_check(folder: Path, machine: Machine) -> None:
    """The power model's decode on battery over its decode on AC, for the held-out laptop's two states (the limits
    it reported: 95 W on AC, 55 W on battery, below the 95-150 W NVIDIA lists), beside the published ratio."""
    c = BATTERY_CHECK
    laptop = find_profile(str(c["gpu"]), load_profiles())
    ac = power_scale(replace(laptop, power_limit_set_w=c["ac_w"]))
    battery = power_scale(replace(laptop, power_limit_set_w=c["battery_w"], on_battery=True))
    assumed = power_scale(replace(laptop, on_battery=True))  # no limit given: the model's own assumption
    assert ac is not None and battery is not None and assumed is not None
    ratio = statistics.median(c["battery_tps"]) / statistics.median(c["ac_tps"])  # type: ignore[arg-type]
    value, low, high = (battery.decode / ac.decode, battery.decode_low / ac.decode_low,
                        battery.decode_high / ac.decode_high)
    print("3. Held-out check: decode on battery against AC (the data never saw it)")
    print(f"   {c['gpu']}, gpt-oss-20b: published battery/AC decode {ratio:.2f} "
          f"({statistics.median(c['battery_tps']):.0f} / {statistics.median(c['ac_tps']):.0f} tok/s, "  # type: ignore[arg-type]
          f"{c['battery_w']:g} W on battery, {c['ac_w']:g} W on AC: memory clock 14001 -> 9001 MHz)")
    print(f"   power model at those limits: decode x{value:.2f} ({low:.2f}-{high:.2f} relative to AC): "
          f"{'inside' if low <= ratio <= high else 'outside'}; prefill x{battery.prefill / ac.prefill:.2f}")
    print(f"   with no limit given, --on-battery assumes {assumed.watts:g} W (the bottom of NVIDIA's range), above "
          f"the {c['battery_w']:g} W this laptop's firmware set: decode on battery is taken as on AC, since the only "
          "published memory-clock drop on battery is this held-out one")
    print(f"   source: {c['source']}")


def main() -> int:
    machine = Machine.elsewhere()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        split_rows(folder, machine)
        sweep_rows()
        battery_check(folder, machine)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
