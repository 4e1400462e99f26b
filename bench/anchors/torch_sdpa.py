#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention (FLASH backend forced) on llmk's attention benchmark shapes: the anchor of
BM_Prefill (bench/attention_prefill.cu) and BM_Decode (bench/attention_decode.cu), measured in the same run.

  python3 bench/anchors/torch_sdpa.py --out anchors/torch_sdpa.json [--min-time 0.1] [--only REGEX] [--list]

Cases: exactly the GPU shapes of the two llmk benchmarks (bench/model/shapes.py mirrors their registrations), named
as llmk names them with the family prefix replaced: SDPA_Prefill<half>/batch:4/seq:4096/heads:16/kv_heads:16/d:128/
causal:0/manual_time, SDPA_Decode<half>/batch:8/kv_len:8192/heads:32/kv_heads:8/d:128/manual_time.

Layout: llmk's token-major tensors ([batch, seq, heads, d]) passed to SDPA as [batch, heads, seq, d] views
(transpose, no copy), so both read the same memory layout. Decode: q_len 1, is_causal False (a causal mask would be
top-left aligned and hide every key but the first), K/V [batch, kv_len, kv_heads, d].
GQA: enable_gqa=True, K and V are NOT expanded (the FLASH backend reads each KV head once for its group); if this
torch has no enable_gqa, K/V are expanded outside the timed region and the context says so. Either way the bytes
counter counts K/V with kv_heads (llmk's formula: the compulsory traffic), so bytes/s compare with llmk's.
Counters: FLOP/s and bytes/s with llmk's formulas (bench/model/work.py: prefill and decode), divided by the mean time.

Timing, comparable with llmk's (bench/support/gpu_timer.hpp, bench_data.hpp):
- CUDA events around every call, synchronized per iteration, mean over iterations until the measured time reaches
  --min-time (Google Benchmark's rule for manual time), after --warmup calls.
- Before each start event the GPU is kept busy with torch.cuda._sleep, so that Python's dispatch overhead (tens of
  us) is hidden and the events time the kernels only; llmk's events include one C++ launch latency (a few us), so at
  us-scale decode shapes this favours SDPA slightly.
- Decode rotates ceil(4 x L2 / cache bytes) copies of the K/V cache, iteration i reading copy i % copies (llmk's
  copies_for / time_rotating): every iteration reads K/V from DRAM. Prefill is not rotated (neither is llmk's).
Output: Google Benchmark JSON (context + benchmarks), rewritten after every case so that a run killed by a time
limit leaves the cases it finished. A failing case is recorded with error_occurred and its message, and the other
cases still run.
Exit: 0 when every case ran, 1 when a case failed (after the whole JSON is written; one line on stderr names the
failed cases), 2 without torch or without a CUDA GPU (one line on stderr).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from model import names, shapes, work  # noqa: E402

DTYPES = {"half": "float16", "bfloat16": "bfloat16"}
DEFAULT_FLUSH_BYTES = 256 << 20  # bench_data.hpp: 4 x L2 when the attribute cannot be read


def cases(only: str | None) -> list[str]:
    out = shapes.prefill_cases("SDPA_Prefill") + shapes.decode_cases("SDPA_Decode")
    return [c for c in out if not only or re.search(only, c)]


def counters(name: str) -> tuple[float, float, dict]:
    bn = names.parse(name)
    fam = work.family_of(bn.base)
    a = bn.args(fam.args)
    w = fam.work(a, bn.targs)
    return w.flops, w.bytes, a


class Timer:
    """Device time of one call per iteration, with the GPU kept busy ahead of the start event."""

    def __init__(self, torch, min_time: float, warmup: int, max_iters: int):
        self.torch, self.min_time, self.warmup, self.max_iters = torch, min_time, warmup, max_iters
        self.cycles_per_s = self._calibrate_sleep()

    def _calibrate_sleep(self):
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            return None
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        s.record()
        torch.cuda._sleep(2_000_000)
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
        return 2_000_000 / (ms / 1e3) if ms > 0 else None

    def run(self, fn) -> tuple[float, int, float]:
        """(mean device seconds per call, iterations, mean host seconds per iteration)."""
        torch = self.torch
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        hosts = []
        for i in range(max(1, self.warmup)):
            t0 = time.perf_counter()
            start.record()
            fn(i)
            stop.record()
            hosts.append(time.perf_counter() - t0)
            stop.synchronize()
        # Sleep long enough that the host has queued start, the call and stop before the GPU reaches start: 3x the
        # enqueue time of a warm call (the first call pays one-time costs), between 50 us and 2 ms.
        host = sorted(hosts[1:] or hosts)[len(hosts[1:] or hosts) // 2]
        sleep_s = min(2e-3, max(50e-6, 3.0 * host))
        sleep_cycles = int(sleep_s * self.cycles_per_s) if self.cycles_per_s else 0
        total, n, wall0 = 0.0, 0, time.perf_counter()  # fn(warmup + n): rotation continues past the warm-up
        wall_cap = max(5.0, 20.0 * self.min_time)
        while n < 1 or (total < self.min_time and n < self.max_iters):
            if sleep_cycles:
                torch.cuda._sleep(sleep_cycles)
            start.record()
            fn(self.warmup + n)
            stop.record()
            stop.synchronize()
            total += start.elapsed_time(stop) / 1e3
            n += 1
            if time.perf_counter() - wall0 > wall_cap:
                break
        return total / n, n, (time.perf_counter() - wall0) / n


def make_prefill(torch, F, a, dtype, gqa_kw):
    b, s, h, kvh, d, causal = a["batch"], a["seq"], a["heads"], a["kv_heads"], a["d"], bool(a["causal"])
    dev = "cuda"
    q = torch.randn(b, s, h, d, device=dev, dtype=dtype).transpose(1, 2)
    k = torch.randn(b, s, kvh, d, device=dev, dtype=dtype).transpose(1, 2)
    v = torch.randn(b, s, kvh, d, device=dev, dtype=dtype).transpose(1, 2)
    extra = {}
    if kvh != h:
        if gqa_kw:
            extra["enable_gqa"] = True
        else:  # expanded outside the timed region
            k, v = k.repeat_interleave(h // kvh, dim=1), v.repeat_interleave(h // kvh, dim=1)
    return (lambda i: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra)), 1


def make_decode(torch, F, a, dtype, gqa_kw, flush_bytes):
    b, L, h, kvh, d = a["batch"], a["kv_len"], a["heads"], a["kv_heads"], a["d"]
    dev = "cuda"
    cache_bytes = 2 * b * L * kvh * d * torch.tensor([], dtype=dtype).element_size()
    copies = max(1, math.ceil(flush_bytes / cache_bytes))
    q = torch.randn(b, h, 1, d, device=dev, dtype=dtype)
    k = torch.randn(copies, b, L, kvh, d, device=dev, dtype=dtype)
    v = torch.randn(copies, b, L, kvh, d, device=dev, dtype=dtype)
    ks = [k[c].transpose(1, 2) for c in range(copies)]
    vs = [v[c].transpose(1, 2) for c in range(copies)]
    extra = {}
    if kvh != h:
        if gqa_kw:
            extra["enable_gqa"] = True
        else:
            ks = [x.repeat_interleave(h // kvh, dim=1) for x in ks]
            vs = [x.repeat_interleave(h // kvh, dim=1) for x in vs]
    return (lambda i: F.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies], is_causal=False,
                                                     **extra)), copies


def save(path: Path | None, context: dict, benchmarks: list[dict]) -> None:
    """Writes the JSON document (atomically: a reader never sees half a file); stdout when no path."""
    doc = json.dumps({"context": context, "benchmarks": benchmarks}, indent=2) + "\n"
    if path is None:
        sys.stdout.write(doc)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(doc)
    tmp.replace(path)


def entry(name: str, unit: str, **kw) -> dict:
    e = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
         "threads": 1, "time_unit": unit}
    e.update(kw)
    return e


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="JSON output (default: stdout)")
    ap.add_argument("--min-time", type=float, default=0.1, help="measured seconds per case (default 0.1)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-iters", type=int, default=5000)
    ap.add_argument("--only", help="regex on the case name")
    ap.add_argument("--list", action="store_true", help="print the cases and exit (no GPU needed)")
    args = ap.parse_args(argv)
    todo = cases(args.only)
    if args.list:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--list | head` ends quietly
        print("\n".join(todo))
        return 0

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001 - any import failure means no anchor
        print(f"torch_sdpa: PyTorch with torch.nn.attention is not importable ({type(e).__name__}: {e}); "
              "no anchor numbers", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"torch_sdpa: no CUDA GPU visible to PyTorch {torch.__version__} (CUDA {torch.version.cuda}); "
              "no anchor numbers", file=sys.stderr)
        return 2

    import inspect
    try:
        gqa_kw = "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):  # a builtin without a signature: try it
        gqa_kw = True
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    flush = 4 * l2 if l2 > 0 else DEFAULT_FLUSH_BYTES
    impl = None
    try:
        impl = torch.nn.attention.current_flash_attention_impl()  # newer torch: 'FA2', 'FA3', ...
    except Exception:  # noqa: BLE001
        pass
    timer = Timer(torch, args.min_time, args.warmup, args.max_iters)
    context = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": platform.node(), "executable": "bench/anchors/torch_sdpa.py", "num_cpus": os.cpu_count(),
        "mhz_per_cpu": 0, "cpu_scaling_enabled": False, "caches": [], "library_build_type": "release",
        "anchor": "torch.nn.functional.scaled_dot_product_attention, sdpa_kernel(SDPBackend.FLASH_ATTENTION)",
        "torch_version": torch.__version__, "cuda_version": torch.version.cuda, "gpu": props.name,
        "flash_impl": impl or "default (FlashAttention-2 in PyTorch's tree)",
        "gqa": "enable_gqa=True (K/V not expanded)" if gqa_kw else "K/V expanded with repeat_interleave (untimed)",
        "bytes_counted": "llmk's formulas: Q, K, V (kv_heads), O once (bench/model/work.py)",
        "timing": ("CUDA events per call, synchronized; GPU kept busy with torch.cuda._sleep before the start event"
                   if timer.cycles_per_s else "CUDA events per call, synchronized (host dispatch included)"),
        "min_time_s": args.min_time, "l2_bytes": l2, "decode_flush_bytes": flush,
    }
    benchmarks = []
    for idx, name in enumerate(todo):
        flops, byts, a = counters(name)
        prefill = name.startswith("SDPA_Prefill")
        unit, scale = ("ms", 1e3) if prefill else ("us", 1e6)  # llmk's units
        dtype = getattr(torch, DTYPES[names.parse(name).targs[0]])
        fn = None
        try:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                if prefill:
                    fn, copies = make_prefill(torch, F, a, dtype, gqa_kw)
                else:
                    fn, copies = make_decode(torch, F, a, dtype, gqa_kw, flush)
                t, n, host = timer.run(fn)
            e = entry(name, unit, iterations=n, real_time=t * scale, cpu_time=host * scale)
            e["FLOP/s"], e["bytes/s"] = flops / t, byts / t
            if not prefill:
                e["kv_copies"] = float(copies)
            print(f"[{idx + 1}/{len(todo)}] {name}: {t * scale:.4g} {unit}, {flops / t / 1e12:.1f} TFLOP/s, "
                  f"{byts / t / 1e9:.0f} GB/s", file=sys.stderr)
        except Exception as ex:  # noqa: BLE001 - one failing case must not stop the others
            msg = f"{type(ex).__name__}: {str(ex).strip().splitlines()[0] if str(ex).strip() else ''}"[:500]
            e = entry(name, unit, iterations=0, real_time=0.0, cpu_time=0.0, error_occurred=True, error_message=msg)
            print(f"[{idx + 1}/{len(todo)}] {name}: ERROR {msg}", file=sys.stderr)
        finally:
            fn = None  # drop the tensors the closure holds before the next case
            torch.cuda.empty_cache()
        benchmarks.append(e)
        if args.out:
            save(args.out, context, benchmarks)
    save(args.out, context, benchmarks)
    if args.out:
        print(f"torch_sdpa: {len(benchmarks)} cases -> {args.out}", file=sys.stderr)
    return exit_code(benchmarks)


def exit_code(benchmarks: list[dict]) -> int:
    """1 when a case failed (its entry has error_occurred; gpu_validate.sh then fails), else 0."""
    failed = [b["name"] for b in benchmarks if b.get("error_occurred")]
    if failed:
        print(f"torch_sdpa: {len(failed)} of {len(benchmarks)} cases FAILED: {', '.join(failed[:5])}"
              + (" ..." if len(failed) > 5 else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
