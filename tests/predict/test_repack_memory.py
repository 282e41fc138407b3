"""Host memory that weight repacking adds (app.predict.memory.repack), hand-computed from ggml's rules, and predict()
counting it for this machine's CPU with repacking on (issue #45)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.choose.verdicts import llama_server_command
from app.model.gguf_facts import read_model_facts
from app.predict.memory.repack import TIED_OUTPUT, amx_bytes, cpu_repack_bytes, matmul_weights, repacked_weights
from app.predict.prediction import predict
from app.predict.profiles import GIB, cpu_profile
from app.predict.settings import PredictSettings
from tests.gguf_synth import write_synthetic_gguf

MIB = 2**20
AMD = ("avx2", "avx512f", "fma")
ARM = ("asimd", "asimddp")


def smollm2_shapes() -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, int]]:
    """SmolLM2-135M-Instruct.Q4_1.gguf's tensor table: 30 layers, n_embd 576, 9 heads of 64 (3 KV heads), n_ff
    1536; every matrix Q4_1 (20 bytes per 32 values), token_embd Q8_0 (34 bytes per 32), tied, norms F32."""
    shapes: dict[str, tuple[str, tuple[int, ...]]] = {"token_embd.weight": ("Q8_0", (576, 49152)),
                                                      "output_norm.weight": ("F32", (576,))}
    for i in range(30):
        b = f"blk.{i}."
        shapes |= {b + "attn_norm.weight": ("F32", (576,)), b + "ffn_norm.weight": ("F32", (576,)),
                   b + "attn_q.weight": ("Q4_1", (576, 576)), b + "attn_k.weight": ("Q4_1", (576, 192)),
                   b + "attn_v.weight": ("Q4_1", (576, 192)), b + "attn_output.weight": ("Q4_1", (576, 576)),
                   b + "ffn_gate.weight": ("Q4_1", (576, 1536)), b + "ffn_up.weight": ("Q4_1", (576, 1536)),
                   b + "ffn_down.weight": ("Q4_1", (1536, 576))}
    per_value = {"Q4_1": 20 / 32, "Q8_0": 34 / 32, "F32": 4}
    sizes = {}
    for name, (t, dims) in shapes.items():
        n = 1
        for d in dims:
            n *= d
        sizes[name] = round(n * per_value[t])
    return shapes, sizes


def test_smollm2_on_an_amx_xeon_takes_the_amx_buffer_llama_cpp_logged() -> None:
    """On an Intel Xeon with AMX, llama.cpp logged "AMX model buffer size = 95.34 MiB" for SmolLM2 Q4_1 (issue
    #45). By hand: the 210 Q4_1 matrices, 63.28 MiB, are packed at their own size (Q4_1 takes no compensation);
    the tied LM head is token_embd again as a matmul weight, Q8_0 [576, 49152]: 18 blocks a row of 34 + 4 bytes
    (Q8_0's int32 compensation), 49152 × 684 = 32.06 MiB. token_embd's own row lookup is never repacked."""
    shapes, sizes = smollm2_shapes()
    got = repacked_weights(shapes, sizes, ("AMX", "CPU_REPACK"), AMD + ("amx_int8",))
    q4_1 = sum(v for k, v in sizes.items() if shapes[k][0] == "Q4_1")
    assert round(q4_1 / MIB, 2) == 63.28
    assert got.bytes_by_buffer == {"AMX": q4_1 + 49152 * 18 * (34 + 4)}
    assert got.tensors_by_buffer == {"AMX": 211}
    assert round(got.total_bytes / MIB, 2) == 95.34
    assert "AMX 95.3 MiB (211 tensors)" in got.describe()


def test_on_an_amd_cpu_without_amx_nothing_of_smollm2_q4_1_is_repacked() -> None:
    """CPU_REPACK on x86 takes Q4_0, Q4_K, IQ4_NL, MXFP4 (AVX2) and Q2_K (AVX-512): neither Q4_1 nor Q8_0."""
    shapes, sizes = smollm2_shapes()
    got = repacked_weights(shapes, sizes, ("CPU_REPACK",), AMD)
    assert got.total_bytes == 0 and got.bytes_by_buffer == {}


def test_which_weights_each_buffer_takes() -> None:
    # AMX: 2-D only, output rows a multiple of 32, row lengths a multiple of the block (32, or 256 for K-quants)
    assert amx_bytes("Q4_0", (64, 32)) == 32 * 2 * 18
    assert amx_bytes("Q4_0", (64, 48)) is None  # 48 output rows
    assert amx_bytes("Q4_K", (256, 32)) == 32 * (144 + 4)  # Q4_K packs 4 more bytes a block
    assert amx_bytes("Q4_K", (128, 32)) is None  # not a whole super-block
    assert amx_bytes("IQ4_XS", (512, 64)) == 64 * 2 * (136 + 2)
    assert amx_bytes("F16", (64, 32)) == 64 * 32 * 2  # taken, not packed
    assert amx_bytes("Q5_0", (64, 32)) is None and amx_bytes("Q4_0", (64, 32, 4)) is None  # no kernel; experts
    # CPU_REPACK: its types for this CPU, output rows a multiple of 8 (of 4 for ARM's 4-row layouts), same size
    assert cpu_repack_bytes("Q4_0", (64, 16), AMD, 1000) == 1000
    assert cpu_repack_bytes("Q4_0", (64, 12), AMD, 1000) is None
    assert cpu_repack_bytes("Q4_0", (64, 12), ARM, 1000) == 1000
    assert cpu_repack_bytes("Q8_0", (64, 16), AMD, 1000) is None and cpu_repack_bytes("Q8_0", (64, 16), ARM, 9) == 9
    assert cpu_repack_bytes("Q2_K", (256, 16), ("avx2",), 5) is None  # Q2_K needs AVX-512
    assert cpu_repack_bytes("Q4_K", (256, 16, 8), AMD, 7) == 7  # a stack of experts (MUL_MAT_ID)


def test_row_lookups_norms_and_convolutions_are_never_offered_and_a_tied_head_is() -> None:
    shapes = {"token_embd.weight": ("Q4_0", (64, 256)), "blk.0.attn_q.weight": ("Q4_0", (64, 64)),
              "blk.0.ssm_conv1d.weight": ("Q4_0", (4, 64)), "blk.0.attn_norm.weight": ("F32", (64,)),
              "rope_freqs.weight": ("F32", (32,))}
    assert set(matmul_weights(shapes)) == {"blk.0.attn_q.weight", TIED_OUTPUT}
    untied = shapes | {"output.weight": ("Q4_0", (64, 256))}
    assert set(matmul_weights(untied)) == {"blk.0.attn_q.weight", "output.weight"}
    sizes = {"token_embd.weight": 9216, "blk.0.attn_q.weight": 2304, "output.weight": 9216}
    got = repacked_weights(shapes, sizes, ("CPU_REPACK",), AMD)
    assert got.total_bytes == 2304 + 9216  # the head counted once, as its own copy; token_embd's lookup not
    assert repacked_weights(shapes, sizes, ("CPU_REPACK",), AMD, on_host=["blk.0.attn_q.weight"]).total_bytes == 2304


def test_buffer_types_not_known_are_named_not_counted() -> None:
    shapes, sizes = smollm2_shapes()
    got = repacked_weights(shapes, sizes, ("CPU_KLEIDIAI", "CPU_REPACK"), ARM)
    assert got.not_counted == ("CPU_KLEIDIAI",) and "CPU_KLEIDIAI not counted" in got.describe()


def test_predict_counts_the_repacked_copies_for_this_cpu_with_repacking_on(tmp_path: Path) -> None:
    """A synthetic Q8_0 model on an ARM CPU with dot-product units: every matrix with a multiple of 4 rows is
    repacked; predict() adds the copies to the host's weights, the fit's need and the JSON, and only with --repack
    1 on a profile that names its extra buffer types (this machine's CPU)."""
    path = write_synthetic_gguf(tmp_path / "m.gguf", tensor_dtype="Q8_0", n_embd=64, n_ff=128, n_vocab=256)
    facts = read_model_facts(path)
    base = cpu_profile("CPU: test", 50.0, 500.0, 16 * GIB)
    here = replace(base, repack_buffers=("CPU_REPACK",), cpu_flags=ARM)
    expected = sum(n for name, n in facts.tensor_bytes.items() if facts.tensor_shapes[name][0] == "Q8_0"
                   and name != "token_embd.weight") + (0 if "output.weight" in facts.tensor_bytes
                                                       else facts.tensor_bytes["token_embd.weight"])
    on = predict(facts, here, PredictSettings(n_ctx=512, repack=1))
    off = predict(facts, here, PredictSettings(n_ctx=512, repack=0))
    other = predict(facts, base, PredictSettings(n_ctx=512, repack=1))
    assert expected > 0 and on.repacked_weight_bytes == expected
    assert on.fit.needed_bytes - off.fit.needed_bytes == expected
    host_on, host_off = (p.memory_per_device()["host"]["weights_bytes"] for p in (on, off))
    assert host_on == host_off + expected and on.cpu_weight_bytes == facts.weight_bytes + expected
    assert on.to_json_dict()["repacked_weight_bytes"] == expected
    assert any("weight repacking" in n for n in on.notes)
    assert off.repacked_weight_bytes == 0 and other.repacked_weight_bytes == 0 and other.fit == off.fit


@pytest.mark.parametrize(("repack", "flag"), [(0, True), (1, False)])
def test_the_llama_server_command_says_no_repack_when_the_figures_are_for_repack_0(repack: int, flag: bool) -> None:
    from app.choose.verdicts import Figure
    from tests.run.test_measure_search import _choice  # a FileChoice as the chooser makes it

    c = replace(_choice("q4.gguf", 4.5, Figure(30.0, "ceiling")), repack=repack)
    assert llama_server_command(c, 4096).endswith(" --no-repack") is flag
