"""The one pairing table: which anchor (baseline) each llmk benchmark is compared with, at the same shape.

ratio = anchor time / llmk time (> 1: llmk is faster). Both sides of a pair count the same FLOPs for the same shape
(the cuBLAS anchors of the quantized GEMMs read other bytes: fp16 weights instead of int4, ...; that difference is
the point of the comparison), except the 8-bit append_kv, whose quantization counts FLOPs the fp16 copy has not. Every memory-bound row is also compared with BM_DeviceCopy, the bandwidth ceiling
(the '% copy' column: the row's bytes/s over the copy's bytes/s).
"""
from __future__ import annotations

import re

DECODE_SHAPE = ("batch", "kv_len", "heads", "kv_heads", "d")
CHUNK_SHAPE = ("batch", "q_len", "kv_len", "heads", "kv_heads", "d")

# Cross-dtype pairs: the llmk side reads its operands at another (narrower) type than the anchor, deliberately
# (e.g. the target for quantized KV caches is >= 1.8x the fp16 cache's token rate): the summary labels their
# anchor "(cross-dtype)" and the pairing table says what differs. The ratio is then the speedup of the format,
# not of the kernel at equal precision.
X_FP8_ATTN = "fp8 Q/K/V vs fp16 (PyTorch has no fp8 attention)"
X_KV = "8-bit KV cache vs the fp16 cache"
X_WEIGHTS = "quantized weights vs fp16 weights"

# (llmk family regex, anchor family ({T} = the llmk family's first template argument), the arguments that must be
# equal (None: all of them), what the anchor is, '' or what differs when the pair is cross-dtype)
PAIRS: list[tuple[str, str, tuple[str, ...] | None, str, str]] = [
    (r"^BM_Prefill<(?P<T>[^,>]+)>$", "SDPA_Prefill<{T}>", None, "PyTorch SDPA, FLASH backend", ""),
    (r"^BM_PrefillMma<(?P<T>[^,>]+)>$", "SDPA_Prefill<{T}>", None, "PyTorch SDPA, FLASH backend", ""),
    (r"^BM_PrefillMmaTile<[^>]+>$", "SDPA_Prefill<half>", None,
     "PyTorch SDPA, FLASH backend (mma.sync tile variants, half)", ""),
    (r"^BM_PrefillFp8<(?P<T>[^,>]+)>$", "SDPA_Prefill<{T}>", None, "PyTorch SDPA fp16, FLASH backend", X_FP8_ATTN),
    (r"^BM_Decode<(?P<T>[^,>]+)>$", "SDPA_Decode<{T}>", None, "PyTorch SDPA, FLASH backend, q_len 1", ""),
    (r"^BM_DecodeSplits<(?P<T>[^,>]+)>$", "SDPA_Decode<{T}>", DECODE_SHAPE,
     "PyTorch SDPA, FLASH backend, q_len 1 (llmk at a fixed split count)", ""),
    (r"^BM_W4A16$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM", X_WEIGHTS),
    (r"^BM_W4A16PerChannel$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM", X_WEIGHTS),
    (r"^BM_W8A16$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM", X_WEIGHTS),
    (r"^BM_W4A16Hopper$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM (the Hopper weight-only kernel at every M)",
     X_WEIGHTS),
    (r"^BM_W4A16MmaSync$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM (the mma.sync weight-only tiles)", X_WEIGHTS),
    (r"^BM_MixedInt8$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM (the layer LLM.int8() replaces)",
     "int8 + fp16 outliers vs fp16"),
    (r"^BM_W8A8$", "BM_CublasLtInt8", None, "cuBLASLt int8 GEMM (int32 out, no dequantization)", ""),
    (r"^BM_FP8$", "BM_CublasLtFp8", None, "cuBLASLt fp8 GEMM", ""),
    (r"^BM_W8A8Hopper$", "BM_CublasLtInt8", None, "cuBLASLt int8 GEMM (llmk's Hopper kernel at M <= 64)", ""),
    (r"^BM_FP8Hopper$", "BM_CublasLtFp8", None, "cuBLASLt fp8 GEMM (llmk's Hopper kernel at M <= 64)", ""),
    (r"^BM_FP8Blockwise$", "BM_CublasLtFp8", None, "cuBLASLt fp8 GEMM (per-tensor scales)", ""),
    (r"^BM_TileGemmF16$", "BM_CublasGemm<half>", None, "cuBLAS fp16 GEMM", ""),
    (r"^BM_GemmF16$", "BM_CublasGemm<half>", None, "cuBLAS fp16 GEMM", ""),
    (r"^BM_TileGemmBF16$", "BM_CublasGemm<bfloat16>", None, "cuBLAS bf16 GEMM", ""),
    (r"^BM_GemmBF16$", "BM_CublasGemm<bfloat16>", None, "cuBLAS bf16 GEMM", ""),
    (r"^BM_Sm90Hgemm$", "BM_CublasHgemm", None, "cuBLAS fp16 GEMM (fp16 out, as llmk's)", ""),
    # llmk's hand-written device-wide kernels against the CUB form of the same operation (issue: keep a
    # hand-written kernel only where it is faster): ratio > 1 keeps the hand kernel.
    (r"^BM_TensorAmax<(?P<T>[^,>]+)>$", "BM_TensorAmaxCub<{T}>", None, "CUB DeviceReduce (llmk::device)", ""),
    (r"^BM_OutlierColumns<(?P<T>[^,>]+)>$", "BM_OutlierColumnsCub<{T}>", None,
     "CUB DeviceSelect (find_outlier_columns' workspace form)", ""),
    (r"^BM_PruneBlockSelect$", "BM_PruneDeviceSort", None, "CUB radix / segmented sort (PruneGpuSelect)", ""),
    (r"^BM_PagedDecode<(?P<T>[^,>]+)>$", "BM_DenseDecode<{T}>", DECODE_SHAPE,
     "llmk dense decode of the same shape (the page indirection's cost)", ""),
    (r"^BM_PagedDecode<(?P<T>[^,>]+),[^>]+>$", "BM_DenseDecode<{T}>", DECODE_SHAPE,
     "llmk dense fp16 decode of the same shape (target: the 8-bit caches >= 1.8x its token rate)", X_KV),
    (r"^BM_PagedPrefill<(?P<T>[^,>]+)>$", "BM_DenseChunkPrefill<{T}>", CHUNK_SHAPE,
     "llmk dense prefill of the same chunk (the pages' cost)", ""),
    (r"^BM_PagedPrefill<(?P<T>[^,>]+),[^>]+>$", "BM_DenseChunkPrefill<{T}>", CHUNK_SHAPE,
     "llmk dense fp16 prefill of the same chunk (the pages' and the dequantization's cost)", X_KV),
    (r"^BM_AppendKv<(?P<T>[^,>]+),[^>]+>$", "BM_AppendKv<{T}>", None,
     "llmk append_kv into the fp16 cache (the quantize-on-write's cost)", X_KV),
]
COPY_ANCHOR = "BM_DeviceCopy"


def anchor_for(family: str) -> tuple[str, tuple[str, ...] | None, str, str] | None:
    """(anchor family, arguments to match, description, '' or what differs in a cross-dtype pair), or None."""
    for pattern, anchor, keys, what, cross in PAIRS:
        m = re.match(pattern, family.replace(", ", ","))
        if m:
            return anchor.format(**m.groupdict()), keys, what, cross
    return None


def pairing_table() -> list[tuple[str, str, str]]:
    """(llmk family pattern, anchor, description) for printing; cross-dtype pairs say so first."""
    rows = [(p.strip("^$"), a, (f"CROSS-DTYPE ({x}): " if x else "") + w +
             ("" if k is None else f"; matched on {', '.join(k)}")) for p, a, k, w, x in PAIRS]
    rows.append(("memory-bound rows", COPY_ANCHOR, "bandwidth ceiling: '% copy' = bytes/s / copy bytes/s"))
    return rows
