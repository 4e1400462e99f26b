"""The shapes the GPU benchmarks run (the LLMK_CUDA registrations of bench/*.cu), as the binaries name them.

Kept in step with the .cu files by hand: a shape added there and not here is simply not in the model's default
table (summarize.py still models every measured entry, from its name).
"""
from __future__ import annotations

# bench/attention_prefill.cu: 16k tokens (batch = 16384 / seq), model dim 2048 (heads = 2048 / d)
TOTAL_TOKENS, MODEL_DIM = 16384, 2048
SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)
# bench/attention_decode.cu: caches above 8 GiB (K + V) are skipped
DECODE_MAX_CACHE_BYTES = 8.0 * 2**30


def _name(family: str, fields: list[tuple[str, int]], suffix: str = "manual_time", named: bool = True) -> str:
    args = [f"{k}:{v}" if named else str(v) for k, v in fields]
    return "/".join([family] + args + ([suffix] if suffix else []))


def prefill_cases(prefix: str = "BM_Prefill") -> list[str]:
    out = []

    def mha(t, dims):
        for d in dims:
            for causal in (0, 1):
                for s in SEQ_LENS:
                    h = MODEL_DIM // d
                    out.append(_name(f"{prefix}<{t}>", [("batch", TOTAL_TOKENS // s), ("seq", s), ("heads", h),
                                                        ("kv_heads", h), ("d", d), ("causal", causal)]))
    mha("half", (64, 128, 256))
    mha("bfloat16", (128,))
    for causal in (0, 1):  # GQA 32/8, d 128 (half only)
        for s in SEQ_LENS:
            out.append(_name(f"{prefix}<half>", [("batch", TOTAL_TOKENS // s), ("seq", s), ("heads", 32),
                                                 ("kv_heads", 8), ("d", 128), ("causal", causal)]))
    return out


def prefill_mma_cases() -> list[str]:
    """BM_PrefillMma: the mma.sync kernel on the same GPU, d 128 MHA (half)."""
    return [c.replace("BM_Prefill<", "BM_PrefillMma<") for c in prefill_cases()
            if "/d:128/" in c and c.startswith("BM_Prefill<half>") and "/heads:16/" in c]


def prefill_fp8_cases() -> list[str]:
    """BM_PrefillFp8: e4m3 Q/K/V, half output, MHA at head dims 64, 128, 256."""
    def mha(c: str) -> bool:
        return c.split("/heads:")[1].split("/")[0] == c.split("/kv_heads:")[1].split("/")[0]
    return [c.replace("BM_Prefill<", "BM_PrefillFp8<") for c in prefill_cases()
            if c.startswith("BM_Prefill<half>") and mha(c)]


def decode_shapes() -> list[tuple[int, int, int, int, int]]:
    """(batch, kv_len, heads, kv_heads, d) of BM_Decode: GQA 32/8 then MHA 32/32, d 128."""
    out = []
    for heads, kv_heads in ((32, 8), (32, 32)):
        for batch in (1, 8, 32, 128):
            for kv_len in (512, 2048, 8192, 32768):
                if 2.0 * batch * kv_len * kv_heads * 128 * 2 <= DECODE_MAX_CACHE_BYTES:
                    out.append((batch, kv_len, heads, kv_heads, 128))
    return out


def decode_cases(prefix: str = "BM_Decode") -> list[str]:
    keys = ("batch", "kv_len", "heads", "kv_heads", "d")
    return [_name(f"{prefix}<half>", list(zip(keys, s))) for s in decode_shapes()]


def _mnk(family: str, shapes) -> list[str]:
    return [_name(family, [("M", m), ("N", n), ("K", k)]) for m, n, k in shapes]


GEMM_SHAPES = [(m, n, k) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008)) for m in (1, 16, 64, 128, 256, 4096)]
# bench/quant_gemm.cu weight_only_grid_args: the weight-only families and the cuBLAS fp16 anchor
WO_GRID = [(m, n, k) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (28672, 4096))
           for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 4096)]
# bench/quant_gemm.cu weight_only_crossover_args: BM_W4A16Hopper / BM_W4A16MmaSync (a subset of WO_GRID)
WO_CROSSOVER = [(m, n, k) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008), (28672, 4096))
                for m in (1, 4, 16, 32, 64, 128, 256)]
K_SWEEP_SHAPES = [(4096, 4096, k) for k in (256, 1024, 2048, 4096, 8192)]  # bench/quant_gemm.cu k_sweep_args
TILE_SHAPES = [(4096, 4096, 4096), (1024, 4096, 4096), (16, 4096, 4096), (4096, 11008, 4096)]


def quant_gemm_cases(anchors: bool) -> list[str]:
    out = []
    out += _mnk("BM_W8A8", GEMM_SHAPES)
    for fam in ("BM_W4A16", "BM_W4A16PerChannel", "BM_W8A16"):
        out += _mnk(fam, WO_GRID)
    for fam in ("BM_W4A16Hopper", "BM_W4A16MmaSync"):
        out += _mnk(fam, WO_CROSSOVER)
    for fam in ("BM_W8A8Hopper", "BM_FP8Hopper"):
        out += _mnk(fam, [s for s in GEMM_SHAPES if s[0] <= 64])
    for fam in ("BM_FP8", "BM_MixedInt8", "BM_Sm90Hgemm", "BM_FP8Blockwise"):
        out += _mnk(fam, GEMM_SHAPES)
    for cm in (1, 2):
        for fam in ("BM_Sm90KSweepF16", "BM_Sm90KSweepI8"):
            for bn in (128, 256):
                out += _mnk(f"{fam}<{bn}, {cm}>", K_SWEEP_SHAPES)
            out += _mnk(f"{fam}<128, {cm}, 1>", K_SWEEP_SHAPES)  # ping-pong consumers
    if anchors:
        out += _mnk("BM_CublasHgemm", WO_GRID)
        for fam in ("BM_CublasLtInt8", "BM_CublasLtFp8"):
            out += _mnk(fam, GEMM_SHAPES)
    return out


def tile_gemm_cases(anchors: bool) -> list[str]:
    out = [c for fam in ("BM_TileGemmF16", "BM_GemmF16", "BM_TileGemmBF16", "BM_GemmBF16") for c in _mnk(fam, TILE_SHAPES)]
    if anchors:
        for t in ("half", "bfloat16"):
            out += _mnk(f"BM_CublasGemm<{t}>", TILE_SHAPES)
    return out


def paged_cases() -> list[str]:
    dec = ("batch", "kv_len", "heads", "kv_heads", "d")
    out = []
    dense = [(b, L, 32, 8, 128) for b in (8, 64) for L in (2048, 8192)]
    paged = [(b, L, 32, 8, 128, ps, 0) for b in (8, 64) for L in (2048, 8192) for ps in (1, 8, 16, 32, 128)]
    paged.append((64, 8192, 32, 8, 128, 16, 1))  # CSR form
    pk = dec + ("page_size", "csr")
    out += [_name("BM_DenseDecode<half>", list(zip(dec, s))) for s in dense]
    out += [_name("BM_PagedDecode<half>", list(zip(pk, s))) for s in paged]
    out.append(_name("BM_DenseDecode<bfloat16>", list(zip(dec, (64, 8192, 32, 8, 128)))))
    out.append(_name("BM_PagedDecode<bfloat16>", list(zip(pk, (64, 8192, 32, 8, 128, 16, 0)))))
    for code in ("std::int8_t", "llmk::float8_e4m3"):
        out += [_name(f"BM_PagedDecode<half, {code}>", list(zip(pk, s))) for s in paged]
    ck = ("batch", "q_len", "kv_len", "heads", "kv_heads", "d", "page_size")  # bench/paged_prefill.cu
    chunks = [(4, 512, 4096), (1, 2048, 8192), (8, 2048, 2048)]
    out += [_name("BM_DenseChunkPrefill<half>", list(zip(ck, (b, q, L, 32, 8, 128, 0)))) for b, q, L in chunks]
    for fam in ("BM_PagedPrefill<half>", "BM_PagedPrefill<half, std::int8_t>",
                "BM_PagedPrefill<half, llmk::float8_e4m3>"):
        out += [_name(fam, list(zip(ck, (b, q, L, 32, 8, 128, 16)))) for b, q, L in chunks]
    ak = ("tokens", "seqs", "kv_heads", "d", "page_size")
    for fam in ("BM_AppendKv<half>", "BM_AppendKv<half, std::int8_t>", "BM_AppendKv<half, llmk::float8_e4m3>"):
        out += [_name(fam, list(zip(ak, s))) for s in ((64, 64, 8, 128, 16), (4096, 1, 8, 128, 16))]
    cp = ("pairs", "kv_heads", "d", "page_size")
    for fam in ("BM_CopyPages<half>", "BM_CopyPages<std::int8_t>"):
        out += [_name(fam, list(zip(cp, s))) for s in ((64, 8, 128, 16), (4096, 8, 128, 16))]
    return out


TOKENS_ARGS = [(1, 4096), (16, 4096), (128, 4096), (1024, 4096), (4096, 4096)]
WEIGHT_ARGS = [(4096, 4096), (11008, 4096)]
QUANTIZE_REGISTRATIONS = [  # bench/quantize.cu, in order
    ("BM_QuantizeDynamic<Int8Token, half>", TOKENS_ARGS), ("BM_QuantizeDynamic<Int8Token, bfloat16>", TOKENS_ARGS),
    ("BM_QuantizeDynamic<UInt8TokenAsym, half>", TOKENS_ARGS), ("BM_QuantizeDynamic<E4m3Token, half>", TOKENS_ARGS),
    ("BM_QuantizeDynamic<Int8Tensor, half>", TOKENS_ARGS), ("BM_QuantizeDynamic<E4m3Tensor, half>", TOKENS_ARGS),
    ("BM_QuantizeDynamic<Int4G128, half>", WEIGHT_ARGS), ("BM_QuantizeDynamic<Int4G128, float>", WEIGHT_ARGS),
    ("BM_Quantize<Int8Channel, float>", WEIGHT_ARGS), ("BM_Quantize<Int8Channel, half>", WEIGHT_ARGS),
    ("BM_Quantize<Int4SymG64, half>", WEIGHT_ARGS), ("BM_Quantize<E4m3Tensor, bfloat16>", WEIGHT_ARGS),
    ("BM_Dequantize<Int8Channel, half>", WEIGHT_ARGS), ("BM_Dequantize<Int4G128, half>", WEIGHT_ARGS),
    ("BM_Dequantize<Int4G128, float>", WEIGHT_ARGS), ("BM_Dequantize<E4m3Token, bfloat16>", TOKENS_ARGS),
    ("BM_TensorAmax<half>", TOKENS_ARGS),
]


def quantize_cases() -> list[str]:
    return [_name(fam, [("rows", r), ("cols", c)], named=False) for fam, shapes in QUANTIZE_REGISTRATIONS
            for r, c in shapes]


def obs_cases() -> list[str]:
    out = []
    for fam in ("BM_HessianF16", "BM_HessianBF16", "BM_HessianF32"):
        out += [_name(fam, [("d", d), ("rows", 2048)]) for d in (4096, 11008)]
    for fam in ("BM_GptqGpu", "BM_SparseGptGpu"):
        out += [_name(fam, [("N", n), ("K", 4096)], suffix="iterations:1/real_time") for n in (4096, 11008)]
    return out


def default_cases(anchors: bool = False) -> list[str]:
    """Every GPU benchmark name of the llmk binaries (+ the anchors when asked)."""
    out = prefill_cases() + prefill_mma_cases() + prefill_fp8_cases() + decode_cases()
    if anchors:
        out += prefill_cases("SDPA_Prefill") + decode_cases("SDPA_Decode") + ["BM_DeviceCopy/MiB:1024/manual_time"]
    out += quant_gemm_cases(anchors) + tile_gemm_cases(anchors) + paged_cases() + quantize_cases() + obs_cases()
    return out
