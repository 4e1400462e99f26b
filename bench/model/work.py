"""FLOPs and bytes of every benchmark family, with exactly the formulas of the benchmarks' own counters.

Each formula is the one documented (and computed) at the top of the bench/*.cu file named next to it, so the model
runs without a measurement and a measurement's counters can be cross-checked (rate x time = these numbers).

Work fields:
  flops        the FLOP/s counter's amount per iteration (useful work; causal counts half, GQA counts query heads)
  bytes        the bytes/s counter's amount per iteration
  traffic      the DRAM bytes the roofline charges: == bytes (every bytes counter counts read + written, as
               BM_DeviceCopy's; BM_AppendKv's counted the written bytes only before 2026-11-29)
  tensor_work  the FLOPs the tensor cores actually execute (mma tiles are 16 rows: a GEMM with M = 1 computes 16
               rows; decode computes 16 query-head rows per KV head). Used by the SASS prediction only.
Compute kinds (which peak the roofline takes, before static/report.tsv refines it): see predict.KINDS.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

SIZEOF = {"half": 2, "bfloat16": 2, "llmk::half": 2, "llmk::bfloat16": 2, "float": 4, "std::int8_t": 1,
          "int8_t": 1, "signed char": 1, "std::uint8_t": 1, "llmk::float8_e4m3": 1, "float8_e4m3": 1}

K_OUTLIERS = 32  # bench/quant_gemm.cu: k_outliers of BM_MixedInt8
W4_GROUP = 128  # bench/quant_gemm.cu: group of BM_W4A16
OBS_BLOCK = 128  # bench/obs.cu: GPTQ/SparseGPT block size


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    traffic: float
    tensor_work: float
    note: str = ""
    exps: float = 0.0  # exponentials (MUFU.EX2): one per attention score the kernel computes


@dataclass(frozen=True)
class Family:
    base: str  # family name without template arguments
    args: tuple[str, ...]  # argument names in registration order (names bare-number arguments)
    work: Callable[[dict[str, int], tuple[str, ...]], Work]
    kind: str  # compute kind on sm_90 without a static report (predict.KINDS)
    role: str  # 'llmk' (an llmk kernel), 'anchor' (a baseline), 'host' (runs on the CPU: no GPU roofline)
    source: str  # the bench file whose counters these formulas reproduce


def _ceil16(x: float) -> float:
    return math.ceil(x / 16) * 16


def _size(targs: tuple[str, ...], i: int = 0, default: str = "half") -> int:
    t = targs[i] if len(targs) > i else default
    return SIZEOF.get(t, 2)


# ---- attention (bench/attention_prefill.cu, bench/attention_decode.cu, bench/paged_attention.cu) ----------------
def prefill(a, t):
    b, s, h, kvh, d, causal = a["batch"], a["seq"], a["heads"], a["kv_heads"], a["d"], a["causal"]
    sz = _size(t)
    q, kv = b * s * h * d, b * s * kvh * d
    flops = 4.0 * b * h * s * s * d / (2.0 if causal else 1.0)
    byts = (2.0 * q + 2.0 * kv) * sz
    return Work(flops, byts, byts, flops, exps=flops / (4.0 * d))


def prefill_fp8(a, t):  # e4m3 Q/K/V (1 byte), 16-bit O
    b, s, h, kvh, d, causal = a["batch"], a["seq"], a["heads"], a["kv_heads"], a["d"], a["causal"]
    q, kv = b * s * h * d, b * s * kvh * d
    flops = 4.0 * b * h * s * s * d / (2.0 if causal else 1.0)
    byts = (q + 2.0 * kv) * 1.0 + q * _size(t)
    return Work(flops, byts, byts, flops, exps=flops / (4.0 * d))


def decode(a, t, code_size=None, per_row_scales=False):
    b, L, h, kvh, d = a["batch"], a["kv_len"], a["heads"], a["kv_heads"], a["d"]
    sz = _size(t)
    csz = sz if code_size is None else code_size
    cache, q = b * L * kvh * d, b * h * d
    flops = 4.0 * b * h * L * d
    byts = 2.0 * cache * csz + (2.0 * b * L * kvh * 4 if per_row_scales else 0.0) + 2.0 * q * sz
    # the decode kernel's mma tile holds 16 query heads of one KV head (decode_plan.cuh: DecodeConfig::kRows = 16)
    tensor = 4.0 * b * kvh * _ceil16(h / kvh) * L * d
    return Work(flops, byts, byts, tensor)


INT8 = ("std::int8_t", "int8_t", "signed char")


def paged_decode(a, t):
    code = t[1] if len(t) > 1 else (t[0] if t else "half")
    int8 = code in INT8
    return decode(a, t[:1], code_size=SIZEOF.get(code, 2), per_row_scales=int8)


def chunk_prefill(a, t, code_size=None, per_row_scales=False):  # bench/paged_prefill.cu (causal chunk)
    b, ql, L, h, kvh, d = a["batch"], a["q_len"], a["kv_len"], a["heads"], a["kv_heads"], a["d"]
    sz = _size(t)
    csz = sz if code_size is None else code_size
    pairs = ql * (L - ql) + 0.5 * ql * (ql + 1)
    flops = 4.0 * b * h * d * pairs
    byts = 2.0 * b * ql * h * d * sz + 2.0 * b * L * kvh * d * csz + (2.0 * b * L * kvh * 4 if per_row_scales else 0.0)
    return Work(flops, byts, byts, flops, exps=flops / (4.0 * d))


def paged_chunk_prefill(a, t):
    code = t[1] if len(t) > 1 else (t[0] if t else "half")
    int8 = code in INT8
    return chunk_prefill(a, t[:1], code_size=SIZEOF.get(code, 2), per_row_scales=int8)


def append_kv(a, t):  # new rows read (T) + written (Code) + int8 scales written + slot mapping read
    tokens = a["tokens"]
    rows = tokens * a["kv_heads"]
    code = t[1] if len(t) > 1 else (t[0] if t else "half")
    quantized = len(t) > 1 and t[1] != t[0]
    scales = 2.0 * rows * 4 if code in INT8 else 0.0
    byts = 2.0 * rows * a["d"] * (_size(t) + SIZEOF.get(code, 2)) + scales + 8.0 * tokens
    flops = 2.0 * rows * a["d"] if quantized else 0.0  # one per value quantized (8-bit caches)
    return Work(flops, byts, byts, 0.0)


def copy_pages(a, t):  # pages read + written (K and V), int8 scales read + written, src / dst ids
    rows = a["pairs"] * a["page_size"] * a["kv_heads"]
    code = t[0] if t else "half"
    byts = 4.0 * rows * a["d"] * SIZEOF.get(code, 2) + (4.0 * rows * 4 if code in INT8 else 0.0) + 8.0 * a["pairs"]
    return Work(0.0, byts, byts, 0.0)


def device_copy(a, t):
    byts = 2.0 * a["MiB"] * 2**20
    return Work(0.0, byts, byts, 0.0)


# ---- GEMMs (bench/quant_gemm.cu, bench/tile_gemm.cu) ----------------------------------------------------------------
def _gemm(a, byts):
    m, n, k = a["M"], a["N"], a["K"]
    return Work(2.0 * m * n * k, byts, byts, 2.0 * _ceil16(m) * n * k)


def w8a8(a, t):  # also BM_FP8: 8-bit A and W, fp32 s_a [M] and s_w [N], fp16 D
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, m * k + 4.0 * m + (n * k + 4.0 * n) + 2.0 * m * n)


def mixed_int8(a, t):
    m, n, k = a["M"], a["N"], a["K"]
    weight = n * k + 4.0 * n + 2.0 * n * K_OUTLIERS
    return _gemm(a, m * k + 4.0 * m + 2.0 * m * K_OUTLIERS + weight + 2.0 * m * n)


def _packed(n, k, bits):  # gemm::weight_only_packed_bytes: 512-byte tiles of 16 columns x 256 / bits K
    return math.ceil(n / 16) * math.ceil(k / (256 // bits)) * 512


def w4a16(a, t):  # 4-bit codes, fp16 scales and uint8 zero points per group of 128
    m, n, k = a["M"], a["N"], a["K"]
    quant = (k // W4_GROUP) * n
    return _gemm(a, 2.0 * m * k + _packed(n, k, 4) + 2.0 * quant + quant + 2.0 * m * n)


def w4a16_per_channel(a, t):  # 4-bit codes, per-channel fp16 scales, no zero points
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, 2.0 * m * k + _packed(n, k, 4) + 2.0 * n + 2.0 * m * n)


def w8a16(a, t):  # 8-bit codes, per-channel fp16 scales, no zero points
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, 2.0 * m * k + _packed(n, k, 8) + 2.0 * n + 2.0 * m * n)


def cublas_hgemm(a, t):
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, 2.0 * m * k + 2.0 * n * k + 2.0 * m * n)


def sm90_hgemm(a, t):  # fp16 A and W, fp16 D (gemm_f16_sm90)
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, 2.0 * m * k + 2.0 * n * k + 2.0 * m * n)


def fp8_blockwise(a, t):  # e4m3 A and W, fp32 s_a [K/128, M], s_w [N/128, K/128], fp16 D
    m, n, k = a["M"], a["N"], a["K"]
    kb, nb = math.ceil(k / 128), math.ceil(n / 128)
    return _gemm(a, m * k + 4.0 * kb * m + n * k + 4.0 * nb * kb + 2.0 * m * n)


def cublaslt_int8(a, t):  # raw int32 out
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, m * k + n * k + 4.0 * m * n)


def cublaslt_fp8(a, t):  # e4m3 A and W, fp16 out, no scales
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, m * k + n * k + 2.0 * m * n)


def tile_gemm(a, t):  # 16-bit A and B, fp32 D: BM_TileGemmF16 and its anchor BM_CublasGemm<T>
    m, n, k = a["M"], a["N"], a["K"]
    return _gemm(a, 2.0 * (m * k + n * k) + 4.0 * m * n)


# ---- quantization kernels (bench/quantize.cu) ---------------------------------------------------------------------
# The Quantizer aliases of bench/quantize.cu: (storage bytes per element or 0.5 for int4, asymmetric, granularity).
QUANTIZERS = {
    "Int8Token": (1, False, "row"), "Int8Channel": (1, False, "row"), "Int8Tensor": (1, False, "tensor"),
    "UInt8TokenAsym": (1, True, "row"), "E4m3Token": (1, False, "row"), "E4m3Tensor": (1, False, "tensor"),
    "Int4G128": (0.5, True, 128), "Int4SymG64": (0.5, False, 64),
}


def _quant_parts(a, t):
    rows, cols = a["rows"], a["cols"]
    width, asym, gran = QUANTIZERS.get(t[0] if t else "", (1, False, "row"))
    ldq = (cols + 1) // 2 if width == 0.5 else cols  # quant::storage_row_bytes
    count = 1 if gran == "tensor" else rows if gran == "row" else rows * (cols // gran)  # quant::param_count
    return rows, cols, ldq, count * (8.0 if asym else 4.0)


def quantize(a, t):  # BM_Quantize<Q, In> and BM_QuantizeDynamic<Q, In>
    rows, cols, ldq, params = _quant_parts(a, t)
    byts = rows * cols * _size(t, 1) + rows * ldq + params
    return Work(float(rows * cols), byts, byts, 0.0)


def dequantize(a, t):  # BM_Dequantize<Q, Out>
    rows, cols, ldq, params = _quant_parts(a, t)
    byts = rows * ldq + rows * cols * _size(t, 1) + params
    return Work(float(rows * cols), byts, byts, 0.0)


def tensor_amax(a, t):
    rows, cols = a["rows"], a["cols"]
    byts = rows * cols * _size(t) + 4.0
    return Work(float(rows * cols), byts, byts, 0.0)


def outlier_columns(a, t):  # column max of [rows, cols] + the list (int32 per column)
    rows, cols = a["rows"], a["cols"]
    byts = rows * cols * _size(t) + 8.0 * cols
    return Work(float(rows * cols), byts, byts, 0.0)


def prune_select(a, t):  # read W (fp32) (and diag H), write out (fp32) and mask (u8)
    n, k = float(a["N"]), float(a["K"])
    byts = 9.0 * n * k + 4.0 * k
    return Work(n * k, byts, byts, 0.0, "validation sync + selection")


# ---- OBS (bench/obs.cu) ---------------------------------------------------------------------------------------------
def hessian(dtype):
    def f(a, t):
        d, rows = a["d"], a["rows"]
        flops = float(rows) * d * (d + 1)  # the lower triangle of X^T X
        byts = rows * d * SIZEOF[dtype] + 8.0 * d * d
        return Work(flops, byts, byts, flops)
    return f


def obs_layer(a, t, loss=True):  # GPTQ / SparseGPT, block 128; the loss GEMM 2 n k^2 only when reported
    n, k, b = float(a["N"]), float(a["K"]), float(OBS_BLOCK)
    flops = 4.0 / 3.0 * k**3 + n * k * k + n * k * b + (2.0 * n * k * k if loss else 0.0)
    byts = 4.0 * n * k * k / b + 16.0 * k * k + 9.0 * n * k
    return Work(flops, byts, byts, 0.0, "whole algorithm (cuSOLVER/cuBLAS + kernels), wall time")


def obs_layer_no_loss(a, t):  # BM_GptqHostNoLoss: report_loss = false
    return obs_layer(a, t, loss=False)


MNK = ("M", "N", "K")
DEC = ("batch", "kv_len", "heads", "kv_heads", "d")
CHUNK = ("batch", "q_len", "kv_len", "heads", "kv_heads", "d", "page_size")
_F = [
    Family("BM_Prefill", ("batch", "seq", "heads", "kv_heads", "d", "causal"), prefill, "wgmma_f16", "llmk",
           "bench/attention_prefill.cu (prefill(): the Hopper kernel on sm_90)"),
    Family("BM_PrefillMma", ("batch", "seq", "heads", "kv_heads", "d", "causal"), prefill, "mma_f16", "llmk",
           "bench/attention_prefill.cu (prefill_mma: the mma.sync kernel)"),
    Family("BM_PrefillMmaTile", ("batch", "seq", "heads", "kv_heads", "d", "causal"),
           lambda a, t: prefill(a, ("half",)), "mma_f16", "llmk",
           "bench/attention_prefill.cu (the mma.sync kernel at other tiles, half; template argument = the tile)"),
    Family("BM_PrefillFp8", ("batch", "seq", "heads", "kv_heads", "d", "causal"), prefill_fp8, "wgmma_f8", "llmk",
           "bench/attention_prefill.cu (prefill_fp8: e4m3 Q/K/V on the Hopper kernel)"),
    Family("SDPA_Prefill", ("batch", "seq", "heads", "kv_heads", "d", "causal"), prefill, "mma_f16", "anchor",
           "bench/anchors/torch_sdpa.py (BM_Prefill's formulas)"),
    Family("BM_Decode", DEC, decode, "mma_f16", "llmk", "bench/attention_decode.cu"),
    Family("BM_DecodeSplits", DEC + ("splits",), decode, "mma_f16", "llmk",
           "bench/attention_decode.cu (BM_Decode at a fixed split count)"),
    Family("SDPA_Decode", DEC, decode, "mma_f16", "anchor", "bench/anchors/torch_sdpa.py (BM_Decode's formulas)"),
    Family("BM_DenseDecode", DEC, decode, "mma_f16", "llmk", "bench/paged_attention.cu"),
    Family("BM_PagedDecode", DEC + ("page_size", "csr"), paged_decode, "mma_f16", "llmk", "bench/paged_attention.cu"),
    Family("BM_DenseChunkPrefill", CHUNK, chunk_prefill, "wgmma_f16", "llmk",
           "bench/paged_prefill.cu (prefill_with_config over dense K/V: the paged rows' anchor)"),
    Family("BM_PagedPrefill", CHUNK, paged_chunk_prefill, "wgmma_f16", "llmk",
           "bench/paged_prefill.cu (prefill_paged_with_config: the Hopper kernel's producer gathers pages)"),
    Family("BM_AppendKv", ("tokens", "seqs", "kv_heads", "d", "page_size"), append_kv, "none", "llmk",
           "bench/paged_attention.cu"),
    Family("BM_CopyPages", ("pairs", "kv_heads", "d", "page_size"), copy_pages, "none", "llmk",
           "bench/paged_attention.cu (copy_pages: copy-on-write of whole pages)"),
    Family("BM_DeviceCopy", ("MiB",), device_copy, "none", "anchor", "bench/support/bench_data.hpp"),
    Family("BM_W8A8", MNK, w8a8, "mma_i8", "llmk", "bench/quant_gemm.cu"),
    # fp8 mma.sync on sm_90 is emulated by ptxas with HMMA (perf-audit.md headline 2): the fp16 mma.sync rate
    Family("BM_FP8", MNK, w8a8, "mma_f8_emulated", "llmk", "bench/quant_gemm.cu"),
    Family("BM_W8A8Hopper", MNK, w8a8, "wgmma_i8", "llmk", "bench/quant_gemm.cu (w8a8_gemm_sm90 at M <= 64)"),
    Family("BM_FP8Hopper", MNK, w8a8, "wgmma_f8", "llmk", "bench/quant_gemm.cu (fp8_gemm_sm90 at M <= 64)"),
    Family("BM_MixedInt8", MNK, mixed_int8, "mma_i8", "llmk", "bench/quant_gemm.cu"),
    Family("BM_W4A16", MNK, w4a16, "mma_f16", "llmk", "bench/quant_gemm.cu"),
    Family("BM_W4A16PerChannel", MNK, w4a16_per_channel, "mma_f16", "llmk", "bench/quant_gemm.cu"),
    Family("BM_W8A16", MNK, w8a16, "mma_f16", "llmk", "bench/quant_gemm.cu"),
    Family("BM_W4A16Hopper", MNK, w4a16, "mma_f16", "llmk", "bench/quant_gemm.cu (kernel = kHopper)"),
    Family("BM_W4A16MmaSync", MNK, w4a16, "mma_f16", "llmk", "bench/quant_gemm.cu (kernel = kMmaSync)"),
    Family("BM_Sm90Hgemm", MNK, sm90_hgemm, "wgmma_f16", "llmk", "bench/quant_gemm.cu"),
    Family("BM_Sm90KSweepF16", MNK, sm90_hgemm, "wgmma_f16", "llmk",
           "bench/quant_gemm.cu (gemm_f16_sm90, tile width forced, unsplit)"),
    Family("BM_Sm90KSweepI8", MNK, w8a8, "wgmma_i8", "llmk",
           "bench/quant_gemm.cu (w8a8_gemm_sm90, tile width forced, unsplit)"),
    Family("BM_FP8Blockwise", MNK, fp8_blockwise, "wgmma_f8", "llmk", "bench/quant_gemm.cu"),
    Family("BM_CublasHgemm", MNK, cublas_hgemm, "wgmma_f16", "anchor", "bench/quant_gemm.cu"),
    Family("BM_CublasLtInt8", MNK, cublaslt_int8, "wgmma_i8", "anchor", "bench/quant_gemm.cu"),
    Family("BM_CublasLtFp8", MNK, cublaslt_fp8, "wgmma_f8", "anchor", "bench/quant_gemm.cu"),
    Family("BM_TileGemmF16", MNK, tile_gemm, "mma_f16", "llmk", "bench/tile_gemm.cu"),
    Family("BM_GemmF16", MNK, tile_gemm, "wgmma_f16", "llmk", "bench/tile_gemm.cu"),
    Family("BM_TileGemmBF16", MNK, tile_gemm, "mma_f16", "llmk", "bench/tile_gemm.cu (bf16 A and B)"),
    Family("BM_GemmBF16", MNK, tile_gemm, "wgmma_f16", "llmk", "bench/tile_gemm.cu (bf16 A and B)"),
    Family("BM_CublasGemm", MNK, tile_gemm, "wgmma_f16", "anchor", "bench/tile_gemm.cu"),
    Family("BM_QuantizeDynamic", ("rows", "cols"), quantize, "none", "llmk", "bench/quantize.cu"),
    Family("BM_Quantize", ("rows", "cols"), quantize, "none", "llmk", "bench/quantize.cu"),
    Family("BM_Dequantize", ("rows", "cols"), dequantize, "none", "llmk", "bench/quantize.cu"),
    Family("BM_TensorAmax", ("rows", "cols"), tensor_amax, "none", "llmk", "bench/quantize.cu"),
    Family("BM_TensorAmaxCub", ("rows", "cols"), tensor_amax, "none", "anchor", "bench/quantize.cu"),
    Family("BM_OutlierColumns", ("rows", "cols"), outlier_columns, "none", "llmk", "bench/quantize.cu"),
    Family("BM_OutlierColumnsCub", ("rows", "cols"), outlier_columns, "none", "anchor", "bench/quantize.cu"),
    Family("BM_PruneBlockSelect", ("N", "K", "wanda"), prune_select, "none", "llmk", "bench/obs.cu"),
    Family("BM_PruneDeviceSort", ("N", "K", "wanda"), prune_select, "none", "anchor", "bench/obs.cu"),
    Family("BM_HessianF16", ("d", "rows"), hessian("half"), "mma_f16", "llmk", "bench/obs.cu"),
    Family("BM_HessianBF16", ("d", "rows"), hessian("bfloat16"), "mma_f16", "llmk", "bench/obs.cu"),
    Family("BM_HessianF32", ("d", "rows"), hessian("float"), "fp32", "llmk", "bench/obs.cu"),
    Family("BM_GptqGpu", ("N", "K"), obs_layer, "fp32", "llmk", "bench/obs.cu"),
    Family("BM_SparseGptGpu", ("N", "K"), obs_layer, "fp32", "llmk", "bench/obs.cu"),
    Family("BM_GptqHost", ("N", "K"), obs_layer, "fp32", "host", "bench/obs.cu"),
    Family("BM_GptqHostNoLoss", ("N", "K"), obs_layer_no_loss, "fp32", "host",
           "bench/obs.cu (BM_GptqHost without the loss GEMM: the GPTQ reference's comparison)"),
    Family("BM_SparseGptHost", ("N", "K"), obs_layer, "fp32", "host", "bench/obs.cu"),
]
FAMILIES = {f.base: f for f in _F}


def family_of(base: str) -> Family | None:
    return FAMILIES.get(base)


def work_of(fam: Family, args: dict[str, int], targs: tuple[str, ...]) -> Work | None:
    """The family's Work for these arguments, or None when an argument is missing (a renamed benchmark)."""
    try:
        return fam.work(args, targs)
    except (KeyError, ZeroDivisionError):
        return None
