"""static/report.tsv (scripts/perf/static_gates.py --report) and the one table mapping benchmarks to kernels.

A benchmark family and its arguments pick the kernel that does its work (e.g. BM_W4A16 at M <= 16 runs
weight_only_gemm_kernel<half,4,WeightOnlyConfig<16,32,256,1,1,4,4>,true>); the model reads that kernel's main-loop
counts from the sm_90 NDEBUG (benchmark build) rows. When several rows match (the same kernel compiled in several
objects, or a template flag the benchmark does not fix), the worst (largest) instructions per tensor-core
instruction is taken, and the match says so.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

INT_COLS = ("regs", "smem", "stack", "spill_st", "spill_ld", "warps_h100", "n_loops", "n_tc", "instr", "ldg",
            "ldgsts", "local", "kernel_tc", "kernel_local", "kernel_instr")


@dataclass(frozen=True)
class KernelRow:
    kernel: str  # normalized: no 'void ', no 'llmk::', no spaces after commas
    arch: str
    variant: str
    tc: str  # main-loop tensor-core kinds, '+'-joined, '-' when none
    n_tc: int
    instr: int
    ipt: float
    ldg: int
    regs: int
    raw: dict


def normalize(kernel: str) -> str:
    s = re.sub(r"^void ", "", kernel.strip()).replace("llmk::", "")
    return re.sub(r"\s*,\s*", ",", s)


def read_report(path: Path) -> list[KernelRow]:
    """Every row of a report.tsv; raises OSError/ValueError on an unreadable file."""
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t")
        if not reader.fieldnames or "kernel" not in reader.fieldnames or "ipt" not in reader.fieldnames:
            raise ValueError(f"{path}: not a static_gates report.tsv (no 'kernel'/'ipt' columns)")
        for r in reader:
            def num(k, cast=int):
                try:
                    return cast(r.get(k) or 0)
                except ValueError:
                    return cast(0)
            rows.append(KernelRow(normalize(r["kernel"]), r.get("arch", ""), r.get("variant", ""),
                                  r.get("tc") or "-", num("n_tc"), num("instr"), num("ipt", float), num("ldg"),
                                  num("regs"), dict(r)))
    return rows


def benchmark_rows(rows: list[KernelRow]) -> list[KernelRow]:
    """The rows the model uses: sm_90 (or sm_90a) and the ndebug variant (what the benchmarks run)."""
    return [r for r in rows if r.arch.startswith("90") and r.variant == "ndebug"]


# ---- tiles the launchers choose by M (gemm/w8a8.cuh choose_qgemm_tile, gemm/weight_only.cuh) ----------------------
def _qgemm_tile(m, mixed=False):  # KMajorTile<BM,BN,BK,WarpsM,WarpsN,Stages>
    if m <= 16:
        return (16, 64, 128, 1, 2, 4)
    if m <= 64:
        return (64, 128, 64, 2, 2, 3)
    return (128, 128, 64, 2, 4, 2) if mixed else (128, 128, 64, 2, 4, 3)


def _qgemm_blocks_per_sm(t, sms_smem=233472):
    """gemm/w8a8.cuh detail::qgemm_blocks_per_sm: resident split-K blocks of a K-major 8-bit tile on an H100."""
    bm, bn, bk, wm, wn, stages = t
    threads = wm * wn * 32
    ring = stages * (bm + bn) * (bk + 16)
    staged_f32 = bm * (bn * 4 + 16)
    by_regs = 1 if threads >= 256 else (3 if threads >= 128 else 6)
    return max(1, min(by_regs, sms_smem // (max(ring, staged_f32) + 1024)))


def qgemm_splits(m, n, k, sms=132):
    """gemm/w8a8.cuh detail::qgemm_split_plan with split_k = 0 and a workspace (what BM_W8A8 / BM_FP8 pass): the
    split count of an 8-bit mma.sync GEMM (1 on the Hopper kernel, M > 64)."""
    if m > 64:
        return 1
    t = _qgemm_tile(m)
    tiles = math.ceil(m / t[0]) * math.ceil(n / t[1])
    k_tiles = math.ceil(k / t[2])
    want = _qgemm_blocks_per_sm(t) * sms // tiles
    want = min(want, k_tiles // 2, k // (8 * m))
    want = max(1, min(want, 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def _qgemm_kernel(name, a):
    """The mma.sync 8-bit kernel BM_W8A8 / BM_FP8 run at M <= 64: the split-K instantiation where K is split."""
    split = "true" if qgemm_splits(a["M"], a["N"], a["K"]) > 1 else "false"
    tail = f",false,{split}>" if name == "w8a8_kernel" else f",{split}>"
    return rf"^gemm::{name}<half,gemm::KMajorTile<{_csv(_qgemm_tile(a['M']))}>{re.escape(tail)}"


def _wo_staged(a):  # gemm/weight_only.cuh weight_only_staged_quant: N % 16 == 0 with zero points, G % 64 == 0
    # (every benchmark has G = 128 or G = K with K % 64 == 0); the large tile (M > 128) never stages
    return "true" if a["M"] <= 128 and a["N"] % 16 == 0 else "false"


def _wo_tile(m, bits):  # WeightOnlyConfig<BM,BN,BK,WarpsM,WarpsN,WarpsK,Stages>
    if m <= 16:  # WeightOnlySmallM<bits>
        return (16, 128, 256, 1, 2, 2, 3) if bits == 4 else (16, 128, 128, 1, 2, 2, 4)
    if m <= 128:
        return (32, 128, 128, 1, 2, 2, 4)
    return (128, 128, 64, 2, 4, 1, 3)


def _wo_blocks_per_sm(m, bits):
    """gemm/weight_only.cuh detail::wo_blocks_per_sm on an H100: resident blocks by registers and shared memory
    (sizeof the staged SharedStorage, docs/gemm.md's tile table: small 79,120 / 86,032 bytes, medium 70,672 /
    77,584, + 1 KiB a block)."""
    if m > 128:
        return 1
    regs = 3 if m <= 16 else 2
    smem = (79120 if bits == 4 else 86032) if m <= 16 else (70672 if bits == 4 else 77584)
    return max(1, min(regs, 233472 // (smem + 1024)))


def wo_splits(m, n, k, bits, sms=132):
    """gemm/weight_only.cuh detail::wo_plan_tiles with split_k = 0: the split count of a weight-only launch."""
    t = _wo_tile(m, bits)
    tiles = math.ceil(m / t[0]) * math.ceil(n / t[1])
    k_tiles = math.ceil(k / t[2])
    want = max(1, (_wo_blocks_per_sm(m, bits) * sms) // tiles)
    want = min(want, max(1, k_tiles // 2))
    want = min(want, max(1, (k * bits) // (32 * m)))
    want = max(1, min(want, 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def _wo_blocks(bits):
    def f(a, targs):
        t = _wo_tile(a["M"], bits)
        return math.ceil(a["N"] / t[1]) * math.ceil(a["M"] / t[0]) * wo_splits(a["M"], a["N"], a["K"], bits)
    return f


def wo_sm90_token_tile(m, n, sms=132):
    """gemm/weight_only_sm90.cuh detail::wo_sm90_token_tile: 64 tokens where 128 would leave the last wave emptier."""
    def cost(bt):
        tiles = math.ceil(m / bt) * math.ceil(n / 128)
        return math.ceil(tiles / sms) * bt * (1.1 if bt == 64 else 1.0)
    return 64 if cost(64) < cost(128) else 128


def _wo_hopper(a):  # gemm/weight_only.cuh wo_plan: the Hopper kernel for M > 16 (G % 64 == 0, N % 16 == 0 here)
    return a["M"] > 16 and a["N"] % 16 == 0


def split_k_rounds_splits(tiles: int, k_tiles: int, most: int, sms: int) -> int:
    """gemm/split_k.cuh detail::split_k_rounds_splits: the S in [1, most] with the fewest rounds x k-tiles a unit
    (a larger S only for a 5% gain)."""
    def cost(s):
        return math.ceil(tiles * s / sms) * math.ceil(k_tiles / s)
    want = 1
    for s in range(2, most + 1):
        if cost(s) * 20 < cost(want) * 19:
            want = s
    return want


def wo_sm90_splits(m, n, k, bits, sms=132):
    """gemm/weight_only.cuh detail::wo_sm90_plan_splits with split_k = 0: the Hopper kernel's split count (the S
    minimizing rounds x slices a unit, a larger S only for a 5% gain; >= 2 slices of 64 a split, the partials'
    traffic <= twice the weights', <= 16)."""
    tiles = math.ceil(m / wo_sm90_token_tile(m, n, sms)) * math.ceil(n / 128)
    k_tiles = k // 64
    most = min(16, max(1, k_tiles // 2), max(1, (k * bits) // (32 * m)))
    want = max(1, min(split_k_rounds_splits(tiles, k_tiles, most, sms), 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def _wo_kernel(bits, kernel="auto"):
    """The kernel of a weight-only launch: WeightOnlyArgs::kernel kAuto ("auto"), kHopper ("hopper"), kMmaSync."""
    def f(a, targs):
        if kernel == "hopper" or (kernel == "auto" and _wo_hopper(a)):
            return (rf"^gemm::weight_only_sm90_kernel<half,{bits},gemm::WeightOnlySm90Config<"
                    rf"{wo_sm90_token_tile(a['M'], a['N'])},6>")
        return rf"^gemm::weight_only_gemm_kernel<half,{bits},gemm::WeightOnlyConfig<{_csv(_wo_tile(a['M'], bits))}>,{_wo_staged(a)}>"
    return f


def _wo_any_blocks(bits, kernel="auto"):
    def f(a, targs):
        if kernel == "hopper" or (kernel == "auto" and _wo_hopper(a)):  # persistent: one block per unit (tile x split) up to the SM count
            return (math.ceil(a["M"] / wo_sm90_token_tile(a["M"], a["N"])) * math.ceil(a["N"] / 128)
                    * wo_sm90_splits(a["M"], a["N"], a["K"], bits))
        return _wo_blocks(bits)(a, targs)
    return f


def _csv(t):
    return ",".join(str(x) for x in t)


def _prefill_br(d):  # attention/prefill_mma.cuh DefaultPrefillConfig: Br 128 up to d 64, else 64
    return 128 if d <= 64 else 64


def _sm90_prefill_blocks(a) -> int:
    """Blocks of the Hopper prefill (attention/prefill_sm90.cuh): 128 packed (token, head) rows per block when the
    GQA group divides 128 (every benchmark shape), per KV head and sequence."""
    group = a["heads"] // a["kv_heads"]
    rows = (128 // group) * group
    return math.ceil(a["seq"] * group / rows) * a["kv_heads"] * a["batch"]


def _code(targs):
    code = targs[1] if len(targs) > 1 else targs[0] if targs else "half"
    return {"std::int8_t": "signed char", "int8_t": "signed char", "llmk::float8_e4m3": "float8_e4m3"}.get(
        code, code.replace("llmk::", ""))


def _t(targs, default="half"):
    return (targs[0] if targs else default).replace("llmk::", "")


def _tile_gemm_tile(a, sms=132):  # tile_gemm's choice (detail::tile_gemm_takes_large; H100's SMs)
    m, n = a["M"], a["N"]
    if m > 64 and math.ceil(m / 128) * math.ceil(n / 128) >= sms:
        return (128, 128, 32, 2, 2, 4)
    return (64, 64, 64, 2, 2, 3)


def _gemm_blocks(tile_of):
    def f(a, targs):
        t = tile_of(a["M"])
        return math.ceil(a["N"] / t[1]) * math.ceil(a["M"] / t[0])
    return f


# The Hopper GEMM (gemm/hopper_gemm.cuh) that w8a8_gemm / fp8_gemm run for M > 64 on sm_90a builds (what
# scripts/gpu_validate.sh builds on Hopper); its rows come from the assert variant (see match()).
_SM90_GEMM = r"^gemm::gemm_sm90_kernel<gemm::Sm90GemmConfig<{},128,4,false,false>,"
_SM90_GEMM_BN = r"^gemm::gemm_sm90_kernel<gemm::Sm90GemmConfig<{},{},4,false,false>,"


def _sweep_kernel(elem: str, t) -> str:
    """BM_Sm90KSweep*<BN, Cm[, Pp]>'s kernel: Sm90GemmConfig<elem, BN>, in Sm90PingPongGemmConfig when Pp = 1,
    then in Sm90ClusterGemmConfig when Cm = 2."""
    cfg = rf"gemm::Sm90GemmConfig<{elem},{t[0]},4,false,false>"
    if len(t) > 2 and t[2].strip() == "1":
        cfg = rf"gemm::Sm90PingPongGemmConfig<{cfg}\s*>"
    if len(t) > 1 and t[1].strip() == "2":
        return rf"^gemm::gemm_sm90_kernel<gemm::Sm90ClusterGemmConfig<{cfg}\s*>,"
    return rf"^gemm::gemm_sm90_kernel<{cfg},"


def _sweep_blocks(a, t) -> int:
    cm = int(t[1]) if len(t) > 1 else 1
    pairs = math.ceil(math.ceil(a["M"] / 128) / cm) * math.ceil(a["N"] / int(t[0]))
    return min(pairs, 132 // cm) * cm


def sm90_tile_n(m: int, n: int, sms: int = 132) -> int:
    """The Hopper tile width the dispatch picks: gemm::sm90_detail::choose_tile_n, line for line."""
    best, best_cost = 128, 0.0
    for bn in (128, 64, 256):
        tiles = math.ceil(m / 128) * math.ceil(n / bn)
        full, last = divmod(tiles, sms)

        def rnd(active):
            return max(bn / 128.0, 1.5 * active / sms * (128.0 + bn) / 256.0)
        cost = full * rnd(sms) + (rnd(last) if last > 0 else 0.0)
        if bn == 128 or cost < best_cost:
            best, best_cost = bn, cost
    return best


def _sm90_bn(a) -> int:
    """The Hopper tile width of w8a8_gemm / fp8_gemm / gemm_f16_sm90 on 132 SMs."""
    return sm90_tile_n(a["M"], a["N"], 132)


def sm90_splits(m: int, n: int, k: int, sms: int = 132) -> int:
    """gemm/hopper_gemm.cuh sm90_split_plan_chosen with split_k = 0 and a workspace (BM_W8A8 / BM_FP8 at M > 64;
    BK = 128 bytes of 8-bit K): at least 2 k-tiles a split, S <= K / 8M, <= 16."""
    tiles = math.ceil(m / 128) * math.ceil(n / sm90_tile_n(m, n, sms))
    k_tiles = math.ceil(k / 128)
    most = min(16, max(1, k_tiles // 2), max(1, k // (8 * m)))
    want = max(1, min(split_k_rounds_splits(tiles, k_tiles, most, sms), 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def sm90_f16_splits(m: int, n: int, k: int, sms: int = 132) -> int:
    """sm90_split_plan_chosen<half> with split_k = 0 and a workspace (BM_Sm90Hgemm, BM_GemmF16 on Hopper): 64
    fp16 elements a k-tile, the partials at most half the weights' bytes (S <= 2K / 8M)."""
    tiles = math.ceil(m / 128) * math.ceil(n / sm90_tile_n(m, n, sms))
    k_tiles = math.ceil(k / 64)
    most = min(16, max(1, k_tiles // 2), max(1, 2 * k // (8 * m)))
    want = max(1, min(split_k_rounds_splits(tiles, k_tiles, most, sms), 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def _sm90_f16(out: str, elem: str = "half"):
    def f(a, t):
        name = "gemm_sm90_split_kernel" if sm90_f16_splits(a["M"], a["N"], a["K"]) > 1 else "gemm_sm90_kernel"
        return (rf"^gemm::{name}<gemm::Sm90GemmConfig<{elem},{_sm90_bn(a)},4,false,false>,"
                rf"gemm::LinearEpilogue<{out}>")
    return f


def _sm90_f16_blocks(a, t) -> int:
    units = math.ceil(a["M"] / 128) * math.ceil(a["N"] / _sm90_bn(a)) * sm90_f16_splits(a["M"], a["N"], a["K"])
    return min(units, 132)


def tile_gemm_splits(a, sms: int = 132) -> int:
    """gemm/tile_gemm.cuh detail::tile_gemm_split_plan with split_k = 0 and a workspace (BM_TileGemmF16): one wave
    of resident split blocks (3 small, 2 large an SM on an H100), >= 2 k-tiles a split, S <= 2K / 8M, <= 16."""
    bm, bn, bk, wm, wn, stages = _tile_gemm_tile(a)
    m, n, k = a["M"], a["N"], a["K"]
    tiles = math.ceil(m / bm) * math.ceil(n / bn)
    k_tiles = math.ceil(k / bk)
    acc = 4 * (bm // wm // 16) * (bn // wn // 8)
    regs = min(256, 2 * acc + 96)
    smem = max(stages * (bm + bn) * (2 * bk + 16), bm * (bn * 4 + 16))
    blocks = max(1, min(65536 // (wm * wn * 32 * regs), 233472 // (smem + 1024)))
    want = min(blocks * sms // tiles, k_tiles // 2, 2 * k // (8 * m))
    want = max(1, min(want, 16, k_tiles))
    per = math.ceil(k_tiles / want)
    return math.ceil(k_tiles / per)


def _sm90_quant(elem: str):
    def f(a):
        name = "gemm_sm90_split_kernel" if sm90_splits(a["M"], a["N"], a["K"]) > 1 else "gemm_sm90_kernel"
        return (rf"^gemm::{name}<gemm::Sm90GemmConfig<{elem},{_sm90_bn(a)},4,false,false>,"
                r"gemm::QuantEpilogue<half,")
    return f

def _sm90_8bit_blocks(a, hopper: bool = False) -> int:
    """Blocks (units of tiles x splits: the Hopper GEMM is persistent, min(units, SMs) blocks) of BM_W8A8 / BM_FP8
    (hopper: the Hopper kernel at any M, BM_W8A8Hopper / BM_FP8Hopper)."""
    if hopper or a["M"] > 64:
        return math.ceil(a["N"] / _sm90_bn(a)) * math.ceil(a["M"] / 128) * sm90_splits(a["M"], a["N"], a["K"])
    t = _qgemm_tile(a["M"])
    return math.ceil(a["N"] / t[1]) * math.ceil(a["M"] / t[0]) * qgemm_splits(a["M"], a["N"], a["K"])


def _tile_gemm_kernel(elem: str):
    return lambda a, t: ((r"^gemm::tile_gemm_split_kernel<" if tile_gemm_splits(a) > 1 else r"^gemm::tile_gemm_kernel<")
                         + rf"{elem},float,gemm::KMajorTile<{_csv(_tile_gemm_tile(a))}>")


def _tile_gemm_blocks(a, t) -> int:
    return math.ceil(a["N"] / _tile_gemm_tile(a)[1]) * math.ceil(a["M"] / _tile_gemm_tile(a)[0]) * tile_gemm_splits(a)


# family base -> (kernel regex from (args, template args), thread blocks the launch has, or None: enough for all SMs)
KernelRegex = Callable[[dict, tuple], str]
KERNEL_MAP: dict[str, tuple[KernelRegex, Callable[[dict, tuple], int] | None]] = {
    "BM_Prefill": (lambda a, t: rf"^attention::prefill_sm90_kernel<{_t(t)},attention::Sm90PrefillConfig<{a['d']},",
                   lambda a, t: _sm90_prefill_blocks(a)),
    "BM_DenseChunkPrefill": (lambda a, t: rf"^attention::prefill_sm90_kernel<{_t(t)},attention::Sm90PrefillConfig<"
                                          rf"{a['d']},.*RaggedKv<{_t(t)}\s*>",
                             lambda a, t: _sm90_prefill_blocks(dict(a, seq=a["q_len"]))),
    "BM_PagedPrefill": (lambda a, t: rf"^attention::prefill_sm90_kernel<{_t(t)},attention::Sm90PrefillConfig<{a['d']},"
                                     rf".*PagedKvRows<{_t(t)},{re.escape(_code(t))}\s*>",
                        lambda a, t: _sm90_prefill_blocks(dict(a, seq=a["q_len"]))),
    "BM_PrefillFp8": (lambda a, t: rf"^attention::prefill_sm90_kernel<{_t(t)},attention::Sm90Fp8PrefillConfig<{a['d']},"
                                   r".*RaggedKv<float8_e4m3>", lambda a, t: _sm90_prefill_blocks(a)),
    "BM_PrefillMma": (lambda a, t: rf"^attention::prefill_kernel<{_t(t)},attention::PrefillConfig<{a['d']},"
                                   r".*RaggedKv<",
                      lambda a, t: math.ceil(a["seq"] / _prefill_br(a["d"])) * a["heads"] * a["batch"]),
    "BM_Decode": (lambda a, t: rf"^attention::decode_kernel<{_t(t)},attention::DecodeConfig<{a['d']},.*BatchedKv<",
                  None),
    "BM_DecodeSplits": (lambda a, t: rf"^attention::decode_kernel<{_t(t)},attention::DecodeConfig<{a['d']},"
                                     r".*BatchedKv<", None),
    "BM_DenseDecode": (lambda a, t: rf"^attention::decode_kernel<{_t(t)},attention::DecodeConfig<{a['d']},"
                                    r".*BatchedKv<", None),
    "BM_PagedDecode": (lambda a, t: rf"^attention::decode_kernel<{_t(t)},attention::DecodeConfig<{a['d']},"
                                    rf".*PagedKvRows<{_t(t)},{re.escape(_code(t))}\s*>", None),
    "BM_W8A8": (lambda a, t: _sm90_quant("signed char")(a) if a["M"] > 64 else _qgemm_kernel("w8a8_kernel", a),
                lambda a, t: _sm90_8bit_blocks(a)),
    "BM_FP8": (lambda a, t: _sm90_quant("float8_e4m3")(a) if a["M"] > 64 else _qgemm_kernel("fp8_kernel", a),
               lambda a, t: _sm90_8bit_blocks(a)),
    "BM_W8A8Hopper": (lambda a, t: _sm90_quant("signed char")(a), lambda a, t: _sm90_8bit_blocks(a, True)),
    "BM_FP8Hopper": (lambda a, t: _sm90_quant("float8_e4m3")(a), lambda a, t: _sm90_8bit_blocks(a, True)),
    "BM_Sm90Hgemm": (_sm90_f16("half"), _sm90_f16_blocks),
    "BM_FP8Blockwise": (lambda a, t: _SM90_GEMM.format("float8_e4m3") + r"gemm::Fp8BlockScaledEpilogue<half",
                        _gemm_blocks(lambda m: (128, 128))),
    "BM_MixedInt8": (lambda a, t: rf"^gemm::mixed_int8_kernel<half,gemm::KMajorTile<"
                                  rf"{_csv(_qgemm_tile(a['M'], mixed=True))}>",
                     _gemm_blocks(lambda m: _qgemm_tile(m, mixed=True))),
    "BM_W4A16": (_wo_kernel(4), _wo_any_blocks(4)),
    "BM_W4A16PerChannel": (_wo_kernel(4), _wo_any_blocks(4)),
    "BM_W8A16": (_wo_kernel(8), _wo_any_blocks(8)),
    "BM_W4A16Hopper": (_wo_kernel(4, "hopper"), _wo_any_blocks(4, "hopper")),
    "BM_W4A16MmaSync": (_wo_kernel(4, "mma"), _wo_any_blocks(4, "mma")),
    "BM_GemmF16": (_sm90_f16("float"), _sm90_f16_blocks),
    # the K sweep: BN and the cluster size are the template arguments, never split
    "BM_Sm90KSweepF16": (lambda a, t: _sweep_kernel("half", t) + r"gemm::LinearEpilogue<half", _sweep_blocks),
    "BM_Sm90KSweepI8": (lambda a, t: _sweep_kernel("signed char", t) + r"gemm::QuantEpilogue<half,", _sweep_blocks),
    "BM_TileGemmF16": (_tile_gemm_kernel("half"), _tile_gemm_blocks),
    "BM_TileGemmBF16": (_tile_gemm_kernel("bfloat16"), _tile_gemm_blocks),
    "BM_GemmBF16": (_sm90_f16("float", "bfloat16"), _sm90_f16_blocks),
    "BM_HessianF16": (lambda a, t: r"^obs::detail::hessian_mma_kernel<half>", None),
    "BM_HessianBF16": (lambda a, t: r"^obs::detail::hessian_mma_kernel<bfloat16>", None),
    "BM_HessianF32": (lambda a, t: r"^obs::detail::hessian_update_kernel<float>", None),
    "BM_AppendKv": (lambda a, t: rf"^kvcache::append_kv_kernel<{_t(t)},{re.escape(_code(t))}\s*>", None),
    "BM_CopyPages": (lambda a, t: rf"^kvcache::copy_pages_kernel<{re.escape(_code(t))}\s*>", None),
}


@dataclass(frozen=True)
class Match:
    regex: str
    rows: tuple[KernelRow, ...]  # every matching benchmark-build row
    row: KernelRow | None  # the one the model uses (worst ipt)
    blocks: int | None
    note: str
    gmma_n: int = 0  # the N of the wgmma instruction (Hopper GEMM: the tile width BN); 0: OPCODES' assumption
    l2_bytes: float = 0.0  # operand bytes the tiles pull through L2 (Hopper GEMM), 0 where not modelled
    slices: int = 0  # Hopper weight-only: rounds x 64-wide k-slices a block runs (times the fitted slice time)
    token_tile: int = 0  # Hopper weight-only: the token tile (which fitted slice time)


_SM90_CFG = re.compile(r"gemm_sm90_(split_)?kernel<gemm::Sm90GemmConfig<([^,]+),(\d+),\d+,(?:true|false),(true|false)>")


def sm90_gemm_traffic(kernel: str, args: dict, tiles: int | None) -> tuple[int, float]:
    """(the wgmma's N, operand bytes through L2) of a Hopper GEMM row: every 128 x BN tile loads (128 + BN) rows of
    128 bytes per k-tile (BK = 128 bytes of K); promoted fp8 (FastAccum false) issues its wgmmas in slices of at
    most 128 columns. (0, 0.0) for other kernels."""
    mt = _SM90_CFG.search(kernel)
    if not mt or tiles is None or "K" not in args:
        return 0, 0.0
    fp8 = mt.group(2).startswith("float8_")
    elem = 1 if fp8 or mt.group(2) == "signed char" else 2
    bn = int(mt.group(3))
    gmma_n = min(bn, 128) if fp8 and mt.group(4) == "false" else bn
    k_tiles = math.ceil(args["K"] * elem / 128)
    if mt.group(1) and "M" in args and "N" in args:  # split-K: `tiles` counts units, each a 1/S share of K
        k_tiles = math.ceil(k_tiles / sm90_splits(args["M"], args["N"], args["K"]))
    return gmma_n, float(tiles) * k_tiles * (128 + bn) * 128


def match(base: str, args: dict, targs: tuple, rows: list[KernelRow]) -> Match | None:
    """The kernel rows of a benchmark; None when the family has no entry in KERNEL_MAP (not an llmk kernel, or one
    whose main loop has no tensor cores and needs no SASS: the memory term alone predicts it)."""
    entry = KERNEL_MAP.get(base)
    if entry is None:
        return None
    regex_of, blocks_of = entry
    try:
        regex = regex_of(args, targs)
        blocks = blocks_of(args, targs) if blocks_of else None
    except KeyError:
        return Match("", (), None, None, "arguments missing for the kernel mapping")
    found = tuple(r for r in benchmark_rows(rows) if re.search(regex, r.kernel))
    fallback = ""
    if "sm90_kernel" in regex or "sm90_split_kernel" in regex:  # the Hopper GEMM and prefill
        # Only sm_90a code has the wgmma main loop (an sm_90 image of the kernel is a trap). The benchmark builds
        # of CI are sm_90: take the sm_90a rows, from the tests' objects when no benchmark build has them (the
        # epilogue type, which differs, comes after the main loop).
        sm90a = tuple(r for r in rows if r.arch == "90a" and re.search(regex, r.kernel))
        found = tuple(r for r in sm90a if r.variant == "ndebug") or sm90a
        if found and found[0].variant != "ndebug":
            fallback = "sm_90a row of the test build"
    if not found:
        return Match(regex, (), None, blocks, f"no sm_90 ndebug row matches /{regex}/")
    worst = max(found, key=lambda r: r.ipt)
    note = "; ".join(x for x in (fallback, "" if len(found) == 1 else
                                 f"{len(found)} rows match: worst ipt {worst.ipt:.2f} used") if x)
    bn, l2 = sm90_gemm_traffic(worst.kernel, args, blocks)
    slices, bt = wo_sm90_slices(worst.kernel, args, blocks)
    return Match(regex, found, worst, blocks, note, bn, l2, slices, bt)


_WO_SM90_CFG = re.compile(r"weight_only_sm90_kernel<[^,]+,(\d+),gemm::WeightOnlySm90Config<(\d+),")


def wo_sm90_slices(kernel: str, args: dict, units: int | None, sms: int = 132) -> tuple[int, int]:
    """(rounds x slices a unit, token tile) of a Hopper weight-only row: units = tiles x splits, each a 1/S share of
    the K / 64 slices; (0, 0) for other kernels."""
    mt = _WO_SM90_CFG.search(kernel)
    if not mt or not units or not all(x in args for x in ("M", "N", "K")):
        return 0, 0
    bt = int(mt.group(2))
    tiles = math.ceil(args["M"] / bt) * math.ceil(args["N"] / 128)
    splits = max(1, units // tiles)
    return math.ceil(units / sms) * math.ceil(args["K"] // 64 / splits), bt
