"""The GPU table of the cost model: peak rates, bandwidth, clocks; picked by the name nvidia-smi reports.

Every number says where it comes from: "NVIDIA datasheet" (the product datasheet; tensor rates there are quoted
"with sparsity", the dense rate used here is half of that), "whitepaper" (the NVIDIA H100 Tensor Core GPU
Architecture whitepaper), "derived" (computed from the others, formula given) or "assumption" (a judgement, not a
published figure; perf-audit.md explains most of them) or "fitted" (from a measurement under bench/results/, named).
"""
from __future__ import annotations

from dataclasses import dataclass

# ---- per-SM facts shared by every Hopper part (GH100) -------------------------------------------------------------
MUFU_EX2_PER_SM_CLK = 16  # ex2 per clock per SM (4 per sub-partition): CUDA guide throughput table, FA3 paper
ISSUE_SLOTS_PER_SM = 4  # whitepaper: 4 SM sub-partitions, each issues one warp-instruction per clock
WGMMA_F16_FLOP_PER_CLK_SM = 4096  # whitepaper: 1024 dense fp16 FMA/clk per SM on A100, 2x per SM-clock on H100
# mma.sync (HMMA/IMMA, what llmk and FlashAttention-2 issue) on sm_90 reaches only part of the wgmma rate. No NVIDIA
# figure exists; 0.50-0.67 is the range public microbenchmarks suggest (assumption, perf-audit.md section 3). The
# roofline uses the high end (so no kernel should beat it); predictions report both ends.
MMA_SYNC_FRACTION = (0.50, 0.67)
# A device-to-device copy reaches about 90% of the nominal HBM bandwidth (assumption; shared/targets.md: ~3.0 TB/s of
# 3.35 on H100, ~4.3 of 4.8 on H200, read + written counted). A measured BM_DeviceCopy replaces it.
COPY_FRACTION = 0.90
# The operand bandwidth L2 delivers to all SMs at once, fitted from the H100 SXM run of 2026-11-25
# (bench/results/2026-11-25-h100-80gb-hbm3-7e21187-subset and -2bcc0c2): the Hopper GEMM's 128 x 128 k-tile (32 KiB
# of operands per SM) took 0.425 us, fp16 and int8 alike (the slope of time over K at M = N = 4096), so
# 132 x 32 KiB / 0.425 us = 10.2e12 B/s. The datasheets give no L2 bandwidth; H200 and H100 PCIe scale it by SMs.
L2_OPERAND_BYTES_PER_S_H100 = 132 * 32768 / 0.425e-6
# The Hopper weight-only kernel (gemm/weight_only_sm90.cuh): seconds one block takes per 64-wide k-slice of a 128-column
# tile, by token tile, fitted from the same H100 run: at M = 256 (64-token tiles) 22.1, 58.1, 51.0 and 135 us for 1, 3,
# 1 and 7 rounds of 64, 64, 172 and 64 slices (0.297-0.345 us a slice; the smallest grid carries the fixed cost), at
# M = 256, N = 14336 and M = 4096 (128-token tiles) 0.415-0.45 us. Neither the weights' bandwidth nor the tensor rate
# explains it (the loop's dequantization issue and latency does): the model takes it as a floor for that kernel on an
# H100 SXM (and scales it by the sustained clock on other GPUs).
WO_SM90_SLICE_S_H100 = {64: 0.30e-6, 128: 0.43e-6}


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    sms: int  # streaming multiprocessors
    hbm_bytes_per_s: float  # nominal DRAM bandwidth
    tc_f16_dense: float  # FLOP/s, fp16/bf16 in, fp32 accumulate, dense, wgmma
    tc_i8_dense: float  # OP/s, int8 dense, wgmma
    tc_f8_dense: float  # FLOP/s, fp8 dense, wgmma
    fp32_simt: float  # FLOP/s, fp32 FMA on the CUDA cores (non-tensor)
    l2_bytes: int
    l2_bytes_per_s: float  # operand bandwidth of L2 to all SMs (fitted on H100 SXM, see above)
    max_clk_hz: float  # nvidia-smi's max SM clock
    sustained_clk_hz: float  # the clock the prediction assumes under a long tensor-core load
    sources: str  # one line: where the numbers come from

    @property
    def tc_clk_hz(self) -> float:
        """The clock the datasheet's tensor rate implies (derived: peak / (SMs x 4096 FLOP/clk/SM))."""
        return self.tc_f16_dense / (self.sms * WGMMA_F16_FLOP_PER_CLK_SM)

    def copy_bytes_per_s(self) -> float:
        """Achievable copy bandwidth without a measurement (assumption: COPY_FRACTION of nominal)."""
        return self.hbm_bytes_per_s * COPY_FRACTION


H100_SXM = Gpu(
    key="h100-sxm",
    name="NVIDIA H100 SXM5 80GB (HBM3)",
    sms=132,  # whitepaper: 132 SMs on H100 SXM5
    hbm_bytes_per_s=3.35e12,  # NVIDIA datasheet: 3.35 TB/s HBM3
    tc_f16_dense=989.4e12,  # NVIDIA datasheet: 1,979 TFLOPS fp16/bf16 with sparsity -> 989.4 dense
    tc_i8_dense=1978.9e12,  # NVIDIA datasheet: 3,958 TOPS int8 with sparsity -> 1,979 dense
    tc_f8_dense=1978.9e12,  # NVIDIA datasheet: 3,958 TFLOPS fp8 with sparsity -> 1,979 dense
    fp32_simt=66.9e12,  # NVIDIA datasheet: 67 TFLOPS fp32
    l2_bytes=50 * 2**20,  # whitepaper: 50 MB L2
    l2_bytes_per_s=L2_OPERAND_BYTES_PER_S_H100,  # fitted (see L2_OPERAND_BYTES_PER_S_H100)
    max_clk_hz=1.98e9,  # nvidia-smi max SM clock of H100 SXM (1980 MHz)
    sustained_clk_hz=1.755e9,  # assumption (perf-audit.md): clock held under a sustained tensor-core load
    sources="NVIDIA H100 datasheet (SXM), H100 whitepaper; clocks: assumption",
)

H200 = Gpu(
    key="h200",
    name="NVIDIA H200 141GB (HBM3e)",
    sms=132,  # assumption: the same GH100 configuration as H100 SXM (NVIDIA lists the same compute rates)
    hbm_bytes_per_s=4.8e12,  # NVIDIA datasheet: 4.8 TB/s HBM3e, 141 GB
    tc_f16_dense=989.4e12,  # NVIDIA datasheet: 1,979 TFLOPS fp16/bf16 with sparsity
    tc_i8_dense=1978.9e12,  # NVIDIA datasheet: 3,958 TOPS int8 with sparsity
    tc_f8_dense=1978.9e12,  # NVIDIA datasheet: 3,958 TFLOPS fp8 with sparsity
    fp32_simt=66.9e12,  # NVIDIA datasheet: 67 TFLOPS fp32
    l2_bytes=50 * 2**20,  # assumption: same die as H100
    l2_bytes_per_s=L2_OPERAND_BYTES_PER_S_H100,  # assumption: same die and clocks as H100 SXM
    max_clk_hz=1.98e9,  # assumption: same as H100 SXM
    sustained_clk_hz=1.755e9,  # assumption, as for H100 SXM
    sources="NVIDIA H200 datasheet; SM count, L2 and clocks: assumption (same GH100 as H100 SXM)",
)

H100_PCIE = Gpu(
    key="h100-pcie",
    name="NVIDIA H100 PCIe 80GB (HBM2e)",
    sms=114,  # whitepaper: 114 SMs on H100 PCIe
    hbm_bytes_per_s=2.0e12,  # NVIDIA datasheet: 2.0 TB/s HBM2e
    tc_f16_dense=756.0e12,  # NVIDIA datasheet: 1,513 TFLOPS with sparsity
    tc_i8_dense=1513.0e12,  # NVIDIA datasheet: 3,026 TOPS with sparsity
    tc_f8_dense=1513.0e12,  # NVIDIA datasheet: 3,026 TFLOPS with sparsity
    fp32_simt=51.2e12,  # NVIDIA datasheet: 51 TFLOPS fp32
    l2_bytes=50 * 2**20,  # whitepaper: 50 MB L2
    l2_bytes_per_s=L2_OPERAND_BYTES_PER_S_H100 * 114 / 132,  # assumption: the H100 SXM figure per SM
    max_clk_hz=1.755e9,  # assumption: nvidia-smi max SM clock of H100 PCIe
    sustained_clk_hz=1.62e9,  # assumption: the clock the datasheet tensor rate implies (derived: 756e12/(114*4096))
    sources="NVIDIA H100 datasheet (PCIe), H100 whitepaper; clocks: assumption",
)

GPUS = {g.key: g for g in (H100_SXM, H200, H100_PCIE)}
DEFAULT_GPU_NAME = "NVIDIA H100 80GB HBM3"


def pick_gpu(name: str | None) -> tuple[Gpu, str]:
    """(the table entry for an nvidia-smi GPU name, a note saying how it was picked)."""
    n = (name or "").upper()
    if "H200" in n:
        return H200, f"'{name}' -> {H200.key}"
    if "H100" in n and "PCIE" in n:
        return H100_PCIE, f"'{name}' -> {H100_PCIE.key}"
    if "H100" in n:
        return H100_SXM, f"'{name}' -> {H100_SXM.key}"
    if (name or "").lower() in GPUS:  # a table key given directly (--gpu h200)
        g = GPUS[(name or "").lower()]
        return g, f"'{name}' -> {g.key}"
    return H100_SXM, f"unknown GPU '{name}': assuming {H100_SXM.key} (every figure is then a guess)"
