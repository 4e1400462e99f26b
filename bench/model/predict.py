"""Roofline and SASS-count prediction of a benchmark's time on a Hopper GPU. Every output is PREDICTED.

Roofline (an upper bound on speed; no kernel should beat it):
    roofline = max(FLOPs / peak(kind), traffic / HBM nominal bandwidth)
  kind is the tensor-core instruction the kernel's main loop really uses: HMMA -> mma.sync fp16/bf16, IMMA -> mma.sync
  int8, QMMA -> mma.sync fp8, HGMMA/IGMMA/QGMMA -> wgmma at the datasheet rate; on sm_90 fp8 mma.sync is emulated by
  HMMA (perf-audit.md), so BM_FP8 gets the fp16 mma.sync rate. mma.sync peak = MMA_SYNC_FRACTION (high end) x the
  datasheet wgmma rate. Kernels without tensor cores: fp32 CUDA-core peak (BM_HessianF32, GPTQ/SparseGPT) or
  memory only.

Prediction from the static counts of the kernel's main loop (static/report.tsv, sm_90, ndebug build):
    issue_clk  = ipt / 4                      instructions per tensor-core instruction over 4 issue slots per SM
    tensor_clk = FLOPs_per_instr / (FLOP/clk/SM of the mma.sync rate)       FLOP/clk/SM = peak / (SMs x tc clock)
    clk_per_tc = max(issue_clk, tensor_clk)   the compute-bound cost of one tensor-core instruction on one SM
    compute    = (tensor_work / FLOPs_per_instr) x clk_per_tc / (SMs_used x sustained clock)
    l2         = tiles x k-tiles x (128 + BN) x 128 B / L2 operand bandwidth    (Hopper GEMM only; fitted, hardware.py)
                 Hopper weight-only: rounds x slices a block x the fitted time of a slice (hardware.py)
    predicted  = max(traffic / achievable bandwidth, compute, l2)
  FLOPs_per_instr: HMMA.16816 4096, IMMA.16832 / QMMA.16832 8192, *GMMA 64xNxK with N the Hopper GEMM's tile width
  (64x128xK where the kernel name does not say). tensor_work counts
  the padding of 16-row mma tiles (GEMM M = 1 computes 16 rows). SMs_used = min(SMs, thread blocks) where the launch
  is known (GEMMs, prefill), else all SMs. achievable bandwidth = a measured BM_DeviceCopy's bytes/s, else 90% of
  nominal. The implied compute rate is FLOPs / compute. The prediction is a range over MMA_SYNC_FRACTION
  (fast end 0.67, slow end 0.50); its point value is the midpoint. Ignored: launch latency (a few us per launch:
  shapes under ~10 us measure slower), the split-KV merge kernel, wave quantization, occupancy and latency hiding
  beyond the issue bound, L2 effects other than the Hopper GEMM's operand term.
"""
from __future__ import annotations

from dataclasses import dataclass

from .hardware import ISSUE_SLOTS_PER_SM, MMA_SYNC_FRACTION, MUFU_EX2_PER_SM_CLK, WO_SM90_SLICE_S_H100, Gpu
from .sass import KernelRow, Match
from .work import Family, Work

# kind -> (what it is, function(gpu, mma.sync fraction) -> FLOP/s, or None for memory only)
KINDS = {
    "mma_f16": ("mma.sync fp16/bf16 (HMMA)", lambda g, f: g.tc_f16_dense * f),
    "mma_i8": ("mma.sync int8 (IMMA)", lambda g, f: g.tc_i8_dense * f),
    "mma_f8": ("mma.sync fp8 (QMMA)", lambda g, f: g.tc_f8_dense * f),
    "mma_f8_emulated": ("fp8 mma.sync emulated by HMMA on sm_90", lambda g, f: g.tc_f16_dense * f),
    "wgmma_f16": ("wgmma fp16/bf16 (HGMMA)", lambda g, f: g.tc_f16_dense),
    "wgmma_i8": ("wgmma int8 (IGMMA)", lambda g, f: g.tc_i8_dense),
    "wgmma_f8": ("wgmma fp8 (QGMMA)", lambda g, f: g.tc_f8_dense),
    "fp32": ("fp32 CUDA cores", lambda g, f: g.fp32_simt),
    "none": ("memory only", None),
}
# SASS opcode -> (kind, FLOPs per instruction)
OPCODES = {
    "HMMA": ("mma_f16", 16 * 8 * 16 * 2),
    "IMMA": ("mma_i8", 16 * 8 * 32 * 2),
    "QMMA": ("mma_f8", 16 * 8 * 32 * 2),
    "HGMMA": ("wgmma_f16", 64 * 128 * 16 * 2),  # assumption: m64n128k16
    "IGMMA": ("wgmma_i8", 64 * 128 * 32 * 2),  # assumption: m64n128k32
    "QGMMA": ("wgmma_f8", 64 * 128 * 32 * 2),  # assumption: m64n128k32
}


def peak(gpu: Gpu, kind: str, fraction: float = MMA_SYNC_FRACTION[1]) -> float | None:
    fn = KINDS.get(kind, KINDS["none"])[1]
    return fn(gpu, fraction) if fn else None


# The families whose launcher runs the Hopper wgmma kernel above an M on sm_90a builds (w8a8_gemm / fp8_gemm
# for M > 64: hopper_gemm.cuh; weight_only_gemm for M > kWeightOnlySm90MinM = 16: weight_only.cuh), and its
# kind there: without a static row the family's mma.sync kind would price those rows at the mma.sync rate.
HOPPER_ABOVE_M = {"BM_W8A8": (64, "wgmma_i8"), "BM_FP8": (64, "wgmma_f8"), "BM_W4A16": (16, "wgmma_f16"),
                  "BM_W4A16PerChannel": (16, "wgmma_f16"), "BM_W8A16": (16, "wgmma_f16")}


def default_kind(family: Family, args: dict[str, int] | None = None) -> str:
    """The compute kind of a family's row without a static report: the dispatch's kernel for its M."""
    above = HOPPER_ABOVE_M.get(family.base)
    if above and args and args.get("M", 0) > above[0]:
        return above[1]
    return family.kind


def kind_from_sass(family: Family, row: KernelRow | None,
                   args: dict[str, int] | None = None) -> tuple[str, str | None]:
    """(compute kind, the SASS opcode it came from) for a kernel row; without one, the kind of the kernel the
    dispatch runs for `args` (default_kind)."""
    if row is None or row.tc in ("", "-"):
        return default_kind(family, args), None
    ops = row.tc.split("+")
    op = ops[0]
    for o in ops:  # prefer the opcode of the family's own kind (mixed int8 has IMMA + HMMA)
        if o in OPCODES and OPCODES[o][0] == family.kind:
            op = o
    if op not in OPCODES:
        return family.kind, None
    kind = OPCODES[op][0]
    if family.kind == "mma_f8_emulated" and op == "HMMA":
        kind = "mma_f8_emulated"  # the same rate as mma_f16; the name says why
    return kind, op


@dataclass(frozen=True)
class Roofline:
    time: float
    bound: str  # 'compute' or 'memory'
    kind: str
    compute_time: float
    memory_time: float


def roofline(work: Work, gpu: Gpu, kind: str) -> Roofline:
    p = peak(gpu, kind)
    t_c = work.flops / p if (p and work.flops) else 0.0
    t_m = work.traffic / gpu.hbm_bytes_per_s
    return Roofline(max(t_c, t_m), "compute" if t_c > t_m else "memory", kind, t_c, t_m)


@dataclass(frozen=True)
class Prediction:
    fast: float  # seconds at the high mma.sync fraction
    slow: float  # seconds at the low one
    bound: str  # 'memory', 'issue', 'tensor', 'fp32', 'l2', 'mufu', 'fitted'
    achieved_flops: float | None  # FLOP/s implied by the compute estimate (fast end)
    note: str

    @property
    def time(self) -> float:
        return 0.5 * (self.fast + self.slow)


def predict(work: Work, gpu: Gpu, family: Family, m: Match | None, copy_bw: float) -> tuple[Prediction | None, str]:
    """(the prediction, or None with the reason)."""
    mem = work.traffic / copy_bw
    if family.role == "host":
        return None, "host algorithm: no GPU prediction"
    if m is None:
        if family.role == "anchor":
            return None, "not an llmk kernel"
        if family.kind == "none":
            return Prediction(mem, mem, "memory", None, "no tensor-core loop: memory term only"), ""
        if family.kind == "fp32":  # GPTQ / SparseGPT: cuSOLVER, cuBLAS and sequential column loops
            return None, "whole algorithm (library calls + kernels): no prediction"
        return None, "no kernel mapping"
    if m.row is None:
        return None, m.note
    row = m.row
    if row.tc in ("", "-") or row.n_tc == 0:
        c = work.flops / gpu.fp32_simt if family.kind == "fp32" else 0.0
        t = max(mem, c)
        return Prediction(t, t, "fp32" if c > mem else "memory", None,
                          "; ".join(x for x in (m.note, "no tensor-core main loop") if x)), ""
    kind, op = kind_from_sass(family, row)
    fpi = OPCODES[op][1] if op else OPCODES["HMMA"][1]
    if op and op.endswith("GMMA") and m.gmma_n:  # the tile width of the Hopper GEMM is the wgmma's N
        fpi = fpi * m.gmma_n // 128
    sms_used = min(gpu.sms, m.blocks) if m.blocks else gpu.sms
    # ipt counts one warp's instructions per tensor-core instruction. An mma.sync is one warp's; a wgmma is issued
    # by the 4 warps of a warpgroup (each runs the loop), so its issue cost per SM is 4 x ipt slots.
    warps_per_tc = 4 if op and op.endswith("GMMA") else 1
    issue_clk = row.ipt * warps_per_tc / ISSUE_SLOTS_PER_SM
    # Hopper GEMM: the operand slices every tile pulls through L2 (hardware.L2_OPERAND_BYTES_PER_S_H100)
    l2 = m.l2_bytes / gpu.l2_bytes_per_s if m.l2_bytes else 0.0
    # Hopper weight-only: rounds x slices x the per-slice time fitted on an H100 (hardware.WO_SM90_SLICE_S_H100),
    # scaled by the sustained clock (the bound "fitted")
    fitted = 0.0
    if m.slices and m.token_tile in WO_SM90_SLICE_S_H100:
        fitted = m.slices * WO_SM90_SLICE_S_H100[m.token_tile] * 1.755e9 / gpu.sustained_clk_hz
    times, bounds, achieved = [], [], None
    for frac in (MMA_SYNC_FRACTION[1], MMA_SYNC_FRACTION[0]):
        rate_clk = peak(gpu, kind, frac) / (gpu.sms * gpu.tc_clk_hz)  # FLOP/clk/SM
        tensor_clk = fpi / rate_clk
        clk = max(issue_clk, tensor_clk)
        compute = (work.tensor_work / fpi) * clk / (sms_used * gpu.sustained_clk_hz)
        # attention: the exponentials run on the MUFU units beside the tensor cores (FlashAttention-3's limit
        # for fp8 and small head dims); the slower of the two bounds the loop
        mufu = work.exps / (MUFU_EX2_PER_SM_CLK * sms_used * gpu.sustained_clk_hz)
        times.append(max(mem, compute, mufu, l2, fitted))
        bounds.append("fitted" if fitted >= max(mem, compute, mufu, l2) else
                      "memory" if mem >= max(compute, mufu, l2) else "l2" if l2 >= max(compute, mufu) else
                      "mufu" if mufu > compute else ("issue" if issue_clk >= tensor_clk else "tensor"))
        if achieved is None and compute > 0:
            achieved = work.flops / compute
    notes = [f"{op} ipt {row.ipt:.2f}"]
    if sms_used < gpu.sms:
        notes.append(f"{sms_used} blocks < {gpu.sms} SMs")
    if m.note:
        notes.append(m.note)
    return Prediction(times[0], times[1], bounds[1], achieved, "; ".join(notes)), ""
