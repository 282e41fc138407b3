"""Prefill of a split placement: what llama.cpp moves to the GPU per micro-batch (op offload), and over which link.

llama.cpp facts mirrored here (ggml-org/llama.cpp, ggml/src/ggml-backend.cpp at 0054c013, ggml/src/ggml-cuda/
ggml-cuda.cu at 00108827):

* ``ggml_backend_sched_backend_id_from_cur``: an op whose weight sits in a host buffer is offered to a higher
  priority backend when the scheduler's ``op_offload`` is on (llama.cpp's default; llama-bench ``-nopo 1`` turns it
  off); the GPU takes it when ``offload_op`` says so (cause "1.off"). The weight is then copied to the GPU as the
  split's input before the split runs, on the GPU's stream: the copy and the compute follow each other.
* ``ggml_backend_cuda_device_offload_op``: ``get_op_batch_size(op) >= op_offload_min_batch_size``, 32 unless the
  ``GGML_OP_OFFLOAD_MIN_BATCH`` environment variable says otherwise; the batch is ``ne[1]`` of a MUL_MAT and
  ``ne[2]`` of a MUL_MAT_ID (the micro-batch's tokens), 0 for GET_ROWS (the token embedding never moves). The
  Vulkan and SYCL backends answer the same way. A prompt's micro-batches (``-ub``, 512 by default) are over it, a
  decoded token is not: decode runs host weights on the CPU (app/predict/machine_fit/split_expected.py), prefill
  moves them, once per micro-batch.
* ``ggml_backend_sched_compute_splits``: for a MUL_MAT_ID whose expert weights are a host input, only the experts
  the micro-batch's router picked are copied. With routing spread evenly a micro-batch of ``b`` tokens, each picking
  ``k`` of ``n`` experts, uses ``1 - (1 - k/n)^b`` of them (:func:`used_expert_share`): all of them at 512 tokens for
  any model here; real routing is less even, so the bytes counted are the most a micro-batch moves.
* The output layer's matmul has as many rows as tokens asked for logits (a prompt: one), under the minimum: at -ngl 0
  the LM head stays on the CPU, and only the repeating layers' host weights move.

* ``make_cpu_buft_list`` (src/llama-model.cpp): with a GPU device present the host-held weights go to the GPU's
  host buffer type (pinned memory, CUDA_Host) unless ``--no-host 1``, "useful when the processing of large batches is
  offloaded to a GPU device, since it reduces the time spent on data transfers".

A PCIe link's rate is PCI-SIG's per-lane rate times its lanes (:data:`PCIE_GBPS_PER_LANE`: 8b/10b up to Gen 2,
128b/130b from Gen 3, one direction). Measured host-to-device copies reach 76 % of a Gen4 x16 link from pinned memory
and 41-58 % from pageable memory (:data:`PINNED_SHARE`, :data:`PAGEABLE_SHARE`): the figure takes the pinned rate,
the band's slow edge the pageable worst (``--no-host 1``, or a platform that copies no faster).

Routing is not even: the tokens of one prompt share experts, so a micro-batch moves fewer than the even spread says
(a published RTX 3090 sweep of ``-ub``, benchmarks/split_prefill.py, is faster at small micro-batches than even
routing allows). The expected figure takes the even spread, the most a micro-batch moves; the ceiling takes the
least, ``k`` of ``n`` experts (every token picking the same ones), so it stays a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.model.facts import ModelFacts
from app.predict.ceilings.offload import WeightSplit
from app.predict.profiles import HardwareProfile

#: ggml-cuda.cu ``ggml_backend_cuda_reg``: ``op_offload_min_batch_size`` unless GGML_OP_OFFLOAD_MIN_BATCH says
#: otherwise (the Vulkan and SYCL backends keep the same default)
OP_OFFLOAD_MIN_BATCH = 32
#: GB/s per lane, one direction, by PCIe generation: the transfer rate (2.5, 5, 8, 16, 32, 64 GT/s) times the
#: encoding (8b/10b to Gen 2, 128b/130b from Gen 3; Gen 6's FLIT mode taken as 128b/130b) over 8 bits
PCIE_GBPS_PER_LANE: dict[int, float] = {1: 0.25, 2: 0.5, 3: 8 * 128 / 130 / 8, 4: 16 * 128 / 130 / 8,
                                        5: 32 * 128 / 130 / 8, 6: 64 * 128 / 130 / 8}
#: Host-to-device copies as a share of the link's rate: NVlabs/cuda-oxide pull request #976 measured an RTX 4090 on
#: PCIe Gen4 x16 (31.5 GB/s): pageable 12.88-18.42 GB/s from 1 to 64 MiB copies (0.41-0.58), pinned 23.9 GB/s
#: (0.76). llama.cpp keeps host-held weights pinned by default (see the module docstring): the figure and the fast
#: edge take the pinned rate, the slow edge the pageable worst.
PCIE_SHARE_SOURCE = "https://github.com/NVlabs/cuda-oxide/pull/976 (RTX 4090, PCIe Gen4 x16: pageable 12.9-18.4 " \
                    "GB/s, pinned 23.9 GB/s host-to-device)"
PAGEABLE_SHARE = (12.88 / 31.5, 18.42 / 31.5)
PINNED_SHARE = 23.9 / 31.5
#: The link assumed where a profile gives none: the narrowest common one of its kind, said so wherever it is used
ASSUMED_LAPTOP_LINK = (4, 8)
ASSUMED_DESKTOP_LINK = (4, 16)


@dataclass(frozen=True)
class PcieLink:
    """A GPU's PCIe link and where it comes from."""

    gen: int
    lanes: int
    source: str
    assumed: bool = False

    @property
    def raw_gbps(self) -> float:
        """The link's rate in GB/s, one direction."""
        return PCIE_GBPS_PER_LANE[self.gen] * self.lanes

    def copy_gbps(self) -> tuple[float, float, float]:
        """(expected, least, most) GB/s a host-to-device copy of llama.cpp's weights reaches on this link."""
        return self.raw_gbps * PINNED_SHARE, self.raw_gbps * PAGEABLE_SHARE[0], self.raw_gbps * PINNED_SHARE

    def describe(self) -> str:
        how = "assumed, the profile gives none" if self.assumed else self.source
        return f"PCIe {self.gen}.0 x{self.lanes} ({self.raw_gbps:.1f} GB/s; {how})"


def pcie_link(profile: HardwareProfile) -> PcieLink:
    """The profile's link, else the narrowest common one of its kind (assumed, and marked so)."""
    if profile.pcie_gen is not None and profile.pcie_lanes is not None:
        return PcieLink(profile.pcie_gen, profile.pcie_lanes, profile.pcie_source)
    gen, lanes = ASSUMED_LAPTOP_LINK if profile.is_laptop_part else ASSUMED_DESKTOP_LINK
    return PcieLink(gen, lanes, "", assumed=True)


def used_expert_share(n_expert: int, n_expert_used: int, n_tokens: int) -> float:
    """The share of a layer's experts that ``n_tokens`` tokens, each routed to ``n_expert_used`` of ``n_expert``,
    use between them when routing is spread evenly: 1 - (1 - k/n)^b."""
    if n_expert <= 0 or n_expert_used <= 0 or n_tokens <= 0:
        return 0.0
    return 1.0 - (1.0 - min(n_expert_used / n_expert, 1.0)) ** n_tokens


def micro_batches(n_prompt: int, n_ubatch: int) -> list[int]:
    """The micro-batch sizes a prompt runs as: full ``n_ubatch`` ones, then the rest."""
    if n_prompt <= 0:
        return []
    ub = max(int(n_ubatch), 1)
    full, rest = divmod(int(n_prompt), ub)
    return [ub] * full + ([rest] if rest else [])


@dataclass(frozen=True)
class OffloadTraffic:
    """What a split placement keeps in host memory that a prompt's micro-batch moves to the GPU: the repeating
    layers' host weights (their routed experts apart) and the host layers' KV cache per token of context."""

    layer_bytes: float  # host-held weights of the repeating layers, routed experts apart
    expert_bytes: float  # host-held routed-expert weights (all experts stored)
    n_expert: int = 0
    n_expert_used: int = 0
    kv_bytes_per_token: float = 0.0  # of the layers whose KV cache sits in host memory, per token of context

    def bytes_for(self, n_tokens: int, context_tokens: float, *, least: bool = False) -> float:
        """Bytes one micro-batch of ``n_tokens`` moves at ``context_tokens`` in the cache: its experts spread evenly
        (the most), or with ``least`` only ``k`` of ``n`` (every token picking the same ones)."""
        share = (min(self.n_expert_used / self.n_expert, 1.0) if self.n_expert else 0.0) if least else \
            used_expert_share(self.n_expert, self.n_expert_used, n_tokens)
        experts = self.expert_bytes * share
        return self.layer_bytes + experts + self.kv_bytes_per_token * context_tokens

    @property
    def moves_anything(self) -> bool:
        return self.layer_bytes + self.expert_bytes + self.kv_bytes_per_token > 0


def offload_traffic(facts: ModelFacts, split: WeightSplit, type_k: str, type_v: str, kv_on_gpu: bool = True
                    ) -> OffloadTraffic:
    """What ``split`` moves per micro-batch: its repeating layers' host weights and, where the KV cache follows the
    layers (no -nkvo), the host layers' KV cache (their attention runs on the GPU with the rest). With -nkvo the
    KV cache and the attention over it stay on the CPU: nothing of it moves."""
    per_layer = facts.kv_bytes_per_token_per_layer(type_k, type_v)
    host_kv = sum(per_layer[:split.first_gpu_layer]) if kv_on_gpu else 0.0  # the first layers stay on the host
    return OffloadTraffic(float(split.cpu_layer_bytes), float(split.cpu_expert_bytes), facts.n_expert,
                          facts.n_expert_used, float(host_kv))


def transfer_seconds(traffic: OffloadTraffic, n_prompt: int, n_ubatch: int, depth: int, gbps: float, *,
                     least: bool = False) -> float:
    """Seconds a prompt spends moving host weights at ``gbps``: each micro-batch of at least OP_OFFLOAD_MIN_BATCH
    tokens moves its bytes once (a smaller one runs the host's share on the CPU: no copy); ``least``: the fewest
    experts a micro-batch can use (:meth:`OffloadTraffic.bytes_for`)."""
    if gbps <= 0:
        raise ValueError("transfer_seconds: the link's rate must be positive")
    total, done = 0.0, 0
    for b in micro_batches(n_prompt, n_ubatch):
        done += b
        if b >= OP_OFFLOAD_MIN_BATCH:
            total += traffic.bytes_for(b, depth + done, least=least) / (gbps * 1e9)
    return total


def offloaded_tokens(n_prompt: int, n_ubatch: int) -> int:
    """The prompt's tokens in micro-batches big enough for op offload."""
    return sum(b for b in micro_batches(n_prompt, n_ubatch) if b >= OP_OFFLOAD_MIN_BATCH)
