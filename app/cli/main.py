"""``gguf-bench``: inspect GGUF files, run phase-accurate sweeps, predict, list, compare and export past runs.

Progress goes to stderr, results to stdout or ``--out``. User errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys

from app.cli.arg_types import add_margin_option, count, ram_gib_arg
from app.cli.calibrate_cmd import add_calibrate_parser
from app.cli.choose_cmd import add_choose_parser
from app.cli.compare_cmd import add_compare_parser
from app.cli.doctor_cmd import add_doctor_parser
from app.cli.errors import (
    EXIT_CANCELLED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_TESTS_FAILED,
    EXIT_USAGE,
    UserError,
    crash_log,
    print_error,
)
from app.cli.import_cmd import add_import_parser
from app.cli.power_options import add_power_options
from app.cli.predict_cmd import backend_arg, build_arg, cmd_predict
from app.cli.quality_cmd import add_quality_parser
from app.cli.quantize_cmd import add_quantize_parser
from app.cli.read_cmds import cmd_export, cmd_history, cmd_hw, cmd_inspect
from app.cli.remote_cmd import add_remote_options
from app.cli.run_cmd import cmd_run
from app.cli.terminal import guarded_output
from app.cli.url_options import add_url_options
from app.model.gguf_facts import GGUFFileError
from app.paths import DataDirError, absolute_path_env
from app.predict.profiles import ProfileError
from app.predict.questions import DEFAULT_N_CTX
from app.results import export
from app.results.store import StoreError
from app.run.params import (
    FA_AUTO,
    INT,
    MAX_GPU_LAYERS,
    MAX_TOKENS,
    PARAM,
    PARAMS,
    REPACK_AUTO,
    parse_flash_attn,
    parse_n_cpu_moe,
    parse_repack,
)
from app.run.plan import PlanError

OUTPUT_HELP = ("md (a compact table), csv (every column the run has, llama-bench compatible: a local run leaves out "
               "the remote servers' columns), csv-all (every column, always), summary (a short CSV for "
               "spreadsheets: key columns first, sizes in MiB), json or jsonl")


# --- parser ----------------------------------------------------------------------------------------
def _flash_attn_arg(text: str) -> int:
    try:
        return parse_flash_attn(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _repack_arg(text: str) -> int:
    try:
        return parse_repack(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _n_cpu_moe_arg(text: str) -> int:
    try:
        return parse_n_cpu_moe(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"-ncmoe {text!r}: {e}") from None


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gguf-bench", description=__doc__)
    ap.add_argument("--store", help="results database (default: the user data dir)")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="facts read from a GGUF file without loading it")
    p.add_argument("model")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="also size the file's contexts with llama.cpp's dry run (no_alloc, a child process; a local "
                        "file) beside our formulas")
    p.add_argument("--ctx", type=count(1, MAX_TOKENS), action="append",
                   help="a context to size with --dry-run (repeat; default 8192 and 32768)")
    add_url_options(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("run", help="run a benchmark sweep (llama-bench flag names and list syntax)")
    p.add_argument("-m", "--model", action="append", help="GGUF file (repeat for several); default: SmolLM2-135M")
    for prm in PARAMS:  # the sweep settings: llama-bench's flags, list syntax parsed by build_sweep
        scalar_int = prm.kind is INT and not prm.is_list
        p.add_argument(*prm.flags, dest=prm.name, help=prm.help, type=int if scalar_int else None)
    p.add_argument("--sweep", help="sweep preset name (quick, standard, long-context, chat, rag) or TOML file")
    p.add_argument("-o", "--output", choices=export.FORMATS, default="md", help=OUTPUT_HELP)
    p.add_argument("--out", help="write results to this file instead of stdout")
    p.add_argument("--no-store", action="store_true", help="do not save to the results store")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--hw", help="predict against this GPU profile (default: the detected GPU, else this CPU)")
    p.add_argument("--no-predict", action="store_true", help="skip the predicted-ceiling columns")
    p.add_argument("--telemetry", metavar="FILE.csv", help="write the sampled telemetry trace with phase markers")
    add_remote_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("predict", help="predict ceilings, memory and fit without running anything")
    p.add_argument("-m", "--model", help="GGUF file (default: the built-in SmolLM2-135M)")
    p.add_argument("--hw", help='hardware profile, e.g. "RTX 4060 Laptop" (default: this machine)')
    p.add_argument("--ctx", type=count(1, MAX_TOKENS), default=DEFAULT_N_CTX,
                   help=f"context length to fit (tokens, default {DEFAULT_N_CTX}, as every surface asks)")
    p.add_argument("-ngl", "--n-gpu-layers", dest="n_gpu_layers", type=count(0, MAX_GPU_LAYERS), default=999)
    p.add_argument("--ram", dest="ram_gib", type=ram_gib_arg, metavar="GiB",
                   help="system RAM of the machine around the GPU, for placements that keep layers or experts in it "
                        "(default: this machine's for its own hardware; for a GPU named by --hw an assumption: 16 "
                        "GiB beside a laptop GPU, 32 beside a desktop one, said so); the OS's share is held back")
    add_margin_option(p)
    p.add_argument("-ctk", "--cache-type-k", dest="type_k", default="f16")
    p.add_argument("-ctv", "--cache-type-v", dest="type_v", default="f16")
    p.add_argument(*PARAM["flash_attn"].flags, dest="flash_attn", type=_flash_attn_arg, default=FA_AUTO,
                   help="flash attention: on|off|auto or 1|0|-1 (default auto, predicted as on)")
    p.add_argument("-p", "--n-prompt", dest="n_prompt", type=count(0, MAX_TOKENS), default=512,
                   help="prompt tokens for the TTFT (0: generation only, as llama-bench -p 0: no prefill figures)")
    p.add_argument("-n", "--n-gen", dest="n_gen", type=count(0, MAX_TOKENS), default=128, help="generated tokens")
    p.add_argument("-d", "--n-depth", dest="n_depth", type=count(0, MAX_TOKENS), default=0)
    p.add_argument("--repack", dest="repack", type=_repack_arg, default=REPACK_AUTO,
                   help="weight repacking: 0, 1 or auto (default: this machine's, as a run gets it)")
    p.add_argument(*PARAM["n_cpu_moe"].flags, dest="n_cpu_moe", type=_n_cpu_moe_arg, default=0,
                   help="MoE expert tensors of the first N layers in host memory: a count, all or half (default 0)")
    p.add_argument(*PARAM["no_kv_offload"].flags, dest="no_kv_offload", type=int, choices=(0, 1), default=0,
                   help="1: the KV cache in host memory (default 0)")
    p.add_argument(*PARAM["no_op_offload"].flags, dest="no_op_offload", type=int, choices=(0, 1), default=0,
                   help="1: host-held weights' ops stay on the CPU (llama-bench -nopo; default 0: a prompt's "
                        "micro-batch moves them to the GPU)")
    add_power_options(p)
    p.add_argument("-t", "--threads", dest="threads", type=int, default=0,
                   help="CPU threads the expected figures are for (default 0: all, as a run uses)")
    p.add_argument("--backend", type=backend_arg, default=None,
                   help="GPU backend of the expected figures: CUDA, Metal, Vulkan, ROCm or SYCL (default: this "
                        "build's for the GPU's vendor, else the vendor's usual)")
    p.add_argument("--build", type=build_arg, default=None,
                   help="llama.cpp build number the expected figures are for, e.g. 6040 or b6040 (default: the "
                        "installed one)")
    p.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="this machine's CPU: take the memory from llama.cpp's dry run of the file (no_alloc, a child "
                        "process, cached) and check the formulas against it")
    p.add_argument("--json", action="store_true")
    add_url_options(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("history", help="list past runs in the results store")
    p.add_argument("--limit", type=count(1, 1_000_000), default=30)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("export", help="re-export one stored run (a sweep, or a quality run)")
    p.add_argument("run_id", help="run id (a unique prefix, 'last' or 'last-quality')")
    p.add_argument("-o", "--output", choices=export.FORMATS, default="csv", help=OUTPUT_HELP)
    p.add_argument("--out")
    p.set_defaults(func=cmd_export)
    add_compare_parser(sub)

    p = sub.add_parser("hw", help="this machine: CPU, RAM, probed bandwidth, NVIDIA GPUs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-probe", action="store_true", help="skip the bandwidth/compute probe")
    p.add_argument("--reprobe", action="store_true", help="measure again; the cache keeps the better figures")
    p.set_defaults(func=cmd_hw)
    add_doctor_parser(sub)
    add_choose_parser(sub)
    add_quantize_parser(sub)
    add_quality_parser(sub)
    add_calibrate_parser(sub)
    add_import_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    with guarded_output() as output:  # names escaped, an ASCII terminal, a closed or full stdout: see app.cli.terminal
        absolute_path_env()  # a relative GGUF_WORKBENCH_DATA_DIR means the same folder to the worker
        args = build_parser().parse_args(argv)
        rc = _run_command(args)
        if output.stdout_lost and rc == EXIT_OK:
            rc = EXIT_TESTS_FAILED  # the work was done, but what it printed did not arrive
        return rc


def _run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except (UserError, GGUFFileError, PlanError, StoreError, ProfileError, DataDirError) as e:
        print_error(str(e))
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except OSError as e:  # a full disk, a folder gone: what failed, in one line
        where = f"{e.filename}: " if e.filename else ""
        print_error(f"{where}{e.strerror or e}")
        return EXIT_TESTS_FAILED
    except Exception as e:  # noqa: BLE001 - a bug: one line here, the traceback in a log for the report
        print_error(f"internal error: {type(e).__name__}: {' '.join(str(e).split())[:300]}{crash_log(e)}")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
