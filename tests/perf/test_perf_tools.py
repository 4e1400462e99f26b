#!/usr/bin/env python3
"""Tests of the GPU-result tools without a GPU: summarize.py, the cost model, plot_results.py, torch_sdpa.py.

  python3 tests/perf/test_perf_tools.py        (from the repository root; stdlib unittest, < 30 s)

Runs on a temporary copy of tests/perf/sample_results/2026-01-01-sample-h100-0000000 (SYNTHETIC data, see its
README.md), so the committed sample is never modified.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests/perf/sample_results/2026-01-01-sample-h100-0000000"
SUMMARIZE = ROOT / "scripts/perf/summarize.py"
MODEL = ROOT / "bench/model/model.py"
PLOT = ROOT / "scripts/plot_results.py"
SDPA = ROOT / "bench/anchors/torch_sdpa.py"
sys.path.insert(0, str(ROOT / "bench"))

from model import (block_order, checks, gemm_rounds, hardware, names, pairs, report, results, run_time, sass,  # noqa: E402
                   shapes, work)


def run(*args, timeout=60):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


class SampleCopy(unittest.TestCase):
    """Each test gets its own copy of the sample folder."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="llmk-perf-"))
        self.folder = self.tmp / SAMPLE.name
        shutil.copytree(SAMPLE, self.folder)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class TestSummarize(SampleCopy):
    def summarize(self, *extra):
        done = run(SUMMARIZE, self.folder, *extra)
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout)
        return done.stdout.splitlines()

    def table(self, lines):
        """(index of the table header, the lines after it)."""
        idx = [i for i, l in enumerate(lines) if l.startswith("kernel ") and "measured/predicted" in l]
        self.assertEqual(len(idx), 1, "exactly one table header")
        return idx[0], lines[idx[0] + 1 :]

    def test_table_is_printed_last(self):
        lines = self.summarize()
        i, after = self.table(lines)
        self.assertTrue(after[0].startswith("---"), after[0])
        self.assertTrue(after[-1].startswith("(") and "rows" in after[-1], after[-1])
        for line in after[1:-1]:  # nothing but table rows after the header
            self.assertRegex(line, r"^(BM|SDPA)_\S")
        before = "\n".join(lines[:i])
        self.assertIn("skipped / errored", before)
        self.assertIn("wrote ", before)
        self.assertIn("== Hopper GEMM per round", before)  # the sample's K sweep (gemm_rounds.py)
        self.assertIn("## Hopper GEMM per round (K sweep)", (self.folder / "summary.md").read_text())
        # one row per collapsed entry: BM_DeviceCopy's 3 repetitions + 4 aggregates are not printed as 7 rows
        full = self.summarize("--full")
        _j, rows = self.table(full)
        self.assertEqual(sum(1 for r in rows if r.startswith("BM_DeviceCopy ")), 2)  # decode + paged binaries

    def test_ratio_of_a_hand_checked_pair(self):
        # BM_W4A16/M:1/N:4096/K:4096 20.0 us, BM_CublasHgemm/M:1/N:4096/K:4096 12.5 us: 12.5 / 20.0 = 0.625
        res = results.load(self.folder)
        gpu, note = hardware.pick_gpu(res.meta["gpu"])
        rep = report.build(res, gpu, note, sass.read_report(self.folder / "static/report.tsv"))
        row = next(r for r in rep.rows if r.entry.name == "BM_W4A16/M:1/N:4096/K:4096/manual_time")
        self.assertEqual(row.anchor, "BM_CublasHgemm")
        self.assertAlmostEqual(row.time_s, 20.0e-6, places=12)
        self.assertAlmostEqual(row.anchor_time, 12.5e-6, places=12)
        self.assertAlmostEqual(row.ratio, 0.625, places=9)
        printed = [l for l in self.summarize() if l.startswith("BM_W4A16 ") and " M1 N4096 K4096 " in l]
        self.assertEqual(len(printed), 1)
        self.assertIn("BM_CublasHgemm", printed[0])
        self.assertIn("0.62x", printed[0])  # 0.625 printed with 2 decimals
        # % of roofline by hand: prefill b4 s4096 h16 d128 (non-causal), 215 TFLOP/s in the sample;
        # BM_Prefill runs the Hopper (wgmma) kernel on sm_90: roofline = 4*4*16*4096^2*128 FLOPs / 989.4 TFLOP/s
        # = 556 us -> 22% of 2.557 ms
        pre = next(r for r in rep.rows if r.entry.name ==
                   "BM_Prefill<half>/batch:4/seq:4096/heads:16/kv_heads:16/d:128/causal:0/manual_time")
        flops = 4 * 4 * 16 * 4096**2 * 128
        self.assertAlmostEqual(pre.flops, flops)
        roof = flops / 989.4e12
        self.assertAlmostEqual(pre.roof.time, roof, delta=roof * 1e-9)
        self.assertAlmostEqual(pre.roofline_frac, roof / (flops / 215e12), delta=1e-4)
        self.assertEqual(pre.anchor, "SDPA_Prefill<half>")
        self.assertAlmostEqual(pre.ratio, 215 / 350, delta=1e-4)  # SDPA at 350 TFLOP/s in the sample

    def test_errored_entries_are_reported(self):
        (self.folder / "not_run.txt").write_text("bench_obs_cuda\n")  # gpu_validate.sh: cut by its time budget
        lines = self.summarize()
        text = "\n".join(lines)
        self.assertIn("skipped / errored benchmarks: 2", text)
        self.assertRegex(text, r"BM_CublasLtFp8/M:1/N:4096/K:4096/manual_time: .*CUBLAS_STATUS_NOT_SUPPORTED")
        self.assertIn("SDPA_Decode<half>/batch:1/kv_len:512/heads:32/kv_heads:32/d:128/manual_time", text)
        fp8 = [l for l in lines if l.startswith("BM_FP8 ") and " M1 " in l]
        self.assertEqual(len(fp8), 1)
        self.assertIn("BM_CublasLtFp8 (error)", fp8[0])
        self.assertIn("CUBLAS_STATUS_NOT_SUPPORTED", (self.folder / "summary.md").read_text())
        self.assertRegex(text, r"not run .*: bench_obs_cuda")

    def test_predictions_present_and_labelled(self):
        lines = self.summarize()
        i, after = self.table(lines)
        self.assertIn("predicted time", lines[i])
        self.assertIn("predicted", after[-1])  # the footer says what 'predicted' is
        cols = [m.start() for m in re.finditer(r"\S+(?: \S+)*", lines[i])]
        pred_col = lines[i].index("predicted time")
        w4 = next(l for l in after if l.startswith("BM_W4A16 ") and " M1 " in l)
        cell = w4[pred_col - 2 : pred_col + len("predicted time")].strip()
        self.assertRegex(cell, r"^\d+(\.\d+)? (ns|us|ms|s)$", f"predicted cell {cell!r} (columns {cols})")
        md = (self.folder / "summary.md").read_text()
        self.assertIn("predicted time", md)
        self.assertIn("**predicted**", md)
        self.assertIn("SYNTHETIC", (self.folder / "summary.txt").read_text())
        # without a static report the prediction is n/a, labelled as such
        (self.folder / "static/report.tsv").unlink()
        lines = self.summarize()
        i, after = self.table(lines)
        pred_col = lines[i].index("predicted time")
        w4 = next(l for l in after if l.startswith("BM_W4A16 ") and " M1 " in l)
        self.assertIn("n/a", w4[pred_col:])

    def test_truncated_json_keeps_its_complete_entries(self):
        # A binary stopped by a time limit leaves its JSON cut mid-entry (the second H100 run's quant GEMM):
        # the entries before the cut are results, and the summary says the file was truncated.
        p = self.folder / "bench/bench_quant_gemm_cuda.json"
        text = p.read_text()
        whole = len(json.loads(text)["benchmarks"])
        cut = text.rfind('"real_time"')  # inside the last entry
        p.write_text(text[:cut])
        done = run(SUMMARIZE, self.folder)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn(f"truncated (the binary was stopped): its {whole - 1} complete entries are read", done.stdout)
        self.assertNotIn("unreadable files", done.stdout)

    def test_unreadable_input_exits_2(self):
        done = run(SUMMARIZE, self.tmp / "no-such-folder")
        self.assertEqual(done.returncode, 2)
        self.assertIn("unreadable", done.stderr)
        (self.folder / "bench/bench_obs_cuda.json").write_text('{"benchmarks": [')  # a binary that died mid-write
        done = run(SUMMARIZE, self.folder)
        self.assertEqual(done.returncode, 2)
        self.assertIn("unreadable files: 1", done.stdout)
        self.assertTrue(done.stdout.rstrip().splitlines()[-1].startswith("("), "the table still comes last")


class TestResultsCheck(SampleCopy):
    """summarize.py --check: the GPU run's verdict on its results folder (bench/model/checks.py). The sample has two
    errored rows (bench/bench_quant_gemm_cuda.json, anchors/torch_sdpa.json), no paged prefill JSON and two llmk
    rows whose anchor it lacks."""

    def check(self, *extra):
        return run(SUMMARIZE, "--check", self.folder, *extra)

    def edit(self, rel, keep):
        p = self.folder / rel
        doc = json.loads(p.read_text())
        doc["benchmarks"] = [b for b in doc["benchmarks"] if keep(b)]
        p.write_text(json.dumps(doc, indent=2))

    def make_clean(self):
        """The sample without its errored rows, gaps and missing file: the check passes."""
        self.edit("bench/bench_quant_gemm_cuda.json", lambda b: not b.get("error_occurred"))
        self.edit("anchors/torch_sdpa.json", lambda b: not b.get("error_occurred"))
        self.edit("bench/bench_quant_gemm_cuda.json", lambda b: not b["name"].startswith("BM_FP8/M:1/"))
        self.edit("bench/bench_attention_decode_cuda.json",
                  lambda b: not b["name"].startswith("BM_Decode<half>/batch:1/kv_len:512/heads:32/kv_heads:32/"))
        self.edit("bench/bench_paged_attention_cuda.json", lambda b: not b["name"].startswith("BM_PagedDecode<bfloat16>"))
        self.edit("bench/bench_quantize_cuda.json", lambda b: not b["name"].startswith("BM_TensorAmax<half>/1/"))
        src = json.loads((self.folder / "bench/bench_paged_attention_cuda.json").read_text())
        src["benchmarks"] = [b for b in src["benchmarks"] if b["name"].startswith("BM_DeviceCopy")]
        (self.folder / "bench/bench_paged_prefill_cuda.json").write_text(json.dumps(src))

    def test_error_rows_fail_the_run(self):
        done = self.check()
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        fails = [l for l in done.stdout.splitlines() if l.startswith("FAIL: ")]
        errored = next(l for l in fails if "errored / skipped" in l)
        self.assertIn("2 errored / skipped benchmark rows", errored)
        self.assertIn("BM_CublasLtFp8/M:1/N:4096/K:4096/manual_time", errored)
        self.assertIn("CUBLAS_STATUS_NOT_SUPPORTED", errored)
        self.assertIn("SDPA_Decode<half>/batch:1/kv_len:512/heads:32/kv_heads:32/d:128/manual_time", errored)
        self.assertTrue(any("bench/bench_paged_prefill_cuda.json" in l and "missing output" in l for l in fails))
        self.assertTrue(any("without their anchor" in l and "BM_DenseDecode<bfloat16>" in l for l in fails))

    def test_clean_folder_passes_and_each_gap_fails(self):
        self.make_clean()
        done = self.check()
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("check: ok", done.stdout)
        # an anchor binary that was never built (cuBLASLt absent: the anchors are not registered)
        self.edit("bench/bench_quant_gemm_cuda.json", lambda b: not b["name"].startswith("BM_CublasHgemm"))
        done = self.check()
        self.assertEqual(done.returncode, 1)
        self.assertRegex(done.stdout, r"FAIL: \d+ llmk rows without their anchor \(BM_CublasHgemm;")
        # a binary that was not built at all (LAPACK absent: bench_obs)
        self.make_clean()
        (self.folder / "bench/bench_obs_cuda.json").unlink()
        done = self.check()
        self.assertEqual(done.returncode, 1)
        self.assertRegex(done.stdout, r"FAIL: missing output .*bench/bench_obs_cuda.json")

    def test_skipped_and_untimed_entries_are_errors(self):
        self.make_clean()
        p = self.folder / "bench/bench_quantize_cuda.json"
        doc = json.loads(p.read_text())
        first = doc["benchmarks"][0]
        skipped = dict(first, name="BM_Skipped/1/manual_time", run_name="BM_Skipped/1/manual_time", skipped=True,
                       skip_message="not on this GPU")  # SkipWithMessage, Google Benchmark >= 1.8
        untimed = {k: v for k, v in first.items() if k != "real_time"}
        untimed.update(name="BM_Untimed/1/manual_time", run_name="BM_Untimed/1/manual_time")
        doc["benchmarks"] += [skipped, untimed]
        p.write_text(json.dumps(doc))
        errs = {e.name: e.error for e in results.load(self.folder).errors}
        self.assertEqual(errs["BM_Skipped/1/manual_time"], "skipped: not on this GPU")
        self.assertIn("no real_time", errs["BM_Untimed/1/manual_time"])
        done = self.check()
        self.assertEqual(done.returncode, 1)
        self.assertIn("2 errored / skipped benchmark rows", done.stdout)

    def test_allowlist(self):
        res = results.load(self.folder)
        rows = report.build(res, *hardware.pick_gpu(res.meta.get("gpu")), None).rows
        allow = [checks.Allowed(r"^BM_CublasLtFp8/M:1/", r"NOT_SUPPORTED", r".*", "test: a refused shape"),
                 checks.Allowed(r"^SDPA_Decode<", r"No available kernel", r"^80$", "test: not on this arch")]
        v = checks.check(res, rows, allowed=allow)
        self.assertEqual([(e.name.split("/")[0], why) for e, why in v.allowed], [("BM_CublasLtFp8", "test: a refused shape")])
        errored = next(f for f in v.failures if "errored" in f)
        self.assertIn("1 errored / skipped benchmark rows: SDPA_Decode<half>", errored)  # its arch entry is not 90a
        # the shipped list never excuses a refusal on the Hopper build
        hopper = results.Entry("BM_Sm90Hgemm/M:1/N:1/K:1/manual_time", "bench/x.json", names.parse("BM_Sm90Hgemm/M:1"),
                               None, 0, error="needs sm_90a code")
        self.assertIsNone(checks.allowed_reason(hopper, "90a"))
        self.assertIsNotNone(checks.allowed_reason(hopper, "80"))
        for a in checks.ALLOWED:
            self.assertTrue(a.reason)

    def test_filter_warns_about_excluded_anchors(self):
        self.make_clean()
        (self.folder / "bench/bench_obs_cuda.json").write_text("")  # the filter matched nothing there
        self.edit("bench/bench_quant_gemm_cuda.json", lambda b: not b["name"].startswith("BM_CublasHgemm"))
        done = self.check("--bench-filter", "BM_W4A16/")  # excludes BM_CublasHgemm, the anchor of BM_W4A16
        self.assertEqual(done.returncode, 0, done.stdout)
        self.assertIn("warning: --bench-filter matched nothing in: bench/bench_obs_cuda.json", done.stdout)
        self.assertRegex(done.stdout, r"warning: \d+ llmk rows whose anchor --bench-filter excluded")
        # an anchor the filter takes but that is missing still fails; so does an empty file without a filter
        done = self.check("--bench-filter", "BM_W4A16/|BM_CublasHgemm")
        self.assertEqual(done.returncode, 1)
        self.assertIn("without their anchor (BM_CublasHgemm", done.stdout)
        done = self.check()
        self.assertRegex(done.stdout, r"FAIL: no benchmark ran \(empty JSON\): bench/bench_obs_cuda.json")

    def test_summary_marks_cross_dtype_pairs(self):
        lines = run(SUMMARIZE, self.folder).stdout.splitlines()
        self.assertRegex("\n".join(lines), r"BM_PrefillFp8<.*SDPA_Prefill<\{T\}>.*CROSS-DTYPE \(fp8 Q/K/V vs fp16")
        q = next(l for l in lines if l.startswith("BM_AppendKv<half, std::int8_t> "))
        self.assertIn("BM_AppendKv<half> (cross-dtype)", q)
        q = next(l for l in lines if l.startswith("BM_PagedDecode<half, std::int8_t> "))
        self.assertIn("BM_DenseDecode<half> (cross-dtype)", q)
        plain = next(l for l in lines if l.startswith("BM_PagedDecode<half> "))
        self.assertNotIn("cross-dtype", plain)
        bf16 = next(l for l in lines if l.startswith("BM_TileGemmBF16 "))
        self.assertIn("BM_CublasGemm<bfloat16>", bf16)
        self.assertIn("CROSS-DTYPE (8-bit KV cache vs the fp16 cache)", "\n".join(lines))
        self.assertEqual(pairs.anchor_for("BM_AppendKv<half, std::int8_t>")[0], "BM_AppendKv<half>")
        self.assertIsNone(pairs.anchor_for("BM_AppendKv<half>"))


class TestGpuValidateSummary(SampleCopy):
    """scripts/gpu_validate.sh --summary: the summary/plot step of the GPU command, on the sample (no GPU)."""

    def test_summary_step(self):
        done = subprocess.run(["bash", str(ROOT / "scripts/gpu_validate.sh"), "--summary", str(self.folder)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout)
        lines = done.stdout.splitlines()
        self.assertTrue(lines and lines[-1].startswith("(") and "rows" in lines[-1], lines[-3:])
        self.assertTrue((self.folder / "summary.md").is_file())

    def test_results_check_step_fails_the_run(self):
        # the script's own check block (between its markers), run on the sample: its FAIL lines become problems
        script = (ROOT / "scripts/gpu_validate.sh").read_text()
        left = re.search(r"^left\(\) \{.*?^\}\n", script, re.S | re.M).group(0)
        block = re.search(r"^# ---- the results themselves.*?(?=^# ---- 5/6)", script, re.S | re.M).group(0)
        (self.folder / "logs").mkdir(exist_ok=True)
        harness = (f"set -uo pipefail\ncd '{ROOT}'\nout='{self.folder}'\nbench_filter=''\nproblems=()\nstatus=0\n"
                   "budget=510\nt0=$SECONDS\n" + left + block + 'echo "status=$status"; printf "P:%s\\n" "${problems[@]}"\n')
        done = subprocess.run(["bash", "-c", harness], capture_output=True, text=True, timeout=120)
        self.assertIn("status=1", done.stdout, done.stdout + done.stderr)
        self.assertRegex(done.stdout, r"P:2 errored / skipped benchmark rows: BM_CublasLtFp8/M:1/")
        self.assertTrue((self.folder / "logs/check.log").is_file())

    def test_bad_arguments_exit_2(self):
        for argv in (["--no-such-option"], ["--summary", str(self.tmp / "missing")]):
            done = subprocess.run(["bash", str(ROOT / "scripts/gpu_validate.sh"), *argv], capture_output=True,
                                  text=True, cwd=ROOT, timeout=60)
            self.assertEqual(done.returncode, 2, argv)
            self.assertIn("gpu_validate.sh", done.stderr)

    def test_without_gpu_fails_with_one_clear_line(self):
        if shutil.which("nvidia-smi"):
            self.skipTest("nvidia-smi present: this machine may have a GPU")
        done = subprocess.run(["bash", str(ROOT / "scripts/gpu_validate.sh")], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)
        self.assertEqual(done.returncode, 1)
        out = (done.stdout + done.stderr).strip().splitlines()
        self.assertEqual(len(out), 1, out)
        self.assertRegex(out[0], r"^FAIL: no GPU")


class TestModel(unittest.TestCase):
    def test_roofline_only(self):
        done = run(MODEL)
        self.assertEqual(done.returncode, 0, done.stderr)
        out = done.stdout.splitlines()
        self.assertIn("PREDICTED", out[0])
        header = next(l for l in out if l.startswith("benchmark "))
        self.assertIn("predicted time", header)
        rows = [l for l in out if l.startswith(("BM_", "SDPA_"))]
        self.assertGreater(len(rows), 250)
        self.assertTrue(all(" n/a" in r for r in rows))  # no static report: every prediction n/a
        self.assertTrue(any(r.startswith("BM_Prefill<half> ") for r in rows))

    def test_with_static_report(self):
        done = run(MODEL, "--static", SAMPLE / "static/report.tsv", "--gpu", "NVIDIA H100 80GB HBM3",
                   "--shapes", "default", "--only", "BM_Prefill<half>/batch:4/seq:4096/heads:16|BM_W4A16/M:1/")
        self.assertEqual(done.returncode, 0, done.stderr)
        rows = [l for l in done.stdout.splitlines() if l.startswith("BM_")]
        self.assertEqual(len(rows), 7)  # 2 prefill (causal 0/1) + W4A16 M1 at the grid's 5 (N, K)
        for r in rows:
            self.assertRegex(r, r"\d+(\.\d+)? (ns|us|ms)\s+\d+%")  # predicted time, predicted % of roofline
            self.assertIn("ipt", r)

    def test_qgemm_split_mirror(self):
        # gemm/w8a8.cuh qgemm_split_plan on 132 SMs: the counts tests/gemm/w8a8.cu pins on the C++ side
        want = {(1, 4096, 4096): 8, (1, 11008, 4096): 3, (16, 4096, 11008): 8, (64, 4096, 4096): 8,
                (64, 11008, 4096): 4, (64, 4096, 11008): 12, (64, 72, 528): 1, (4096, 4096, 4096): 1}
        self.assertEqual({s: sass.qgemm_splits(*s) for s in want}, want)
        a = {"M": 1, "N": 4096, "K": 4096}
        self.assertIn(",false,true>", sass.KERNEL_MAP["BM_W8A8"][0](a, ()).replace("\\", ""))
        self.assertEqual(sass.KERNEL_MAP["BM_W8A8"][1](a, ()), 64 * 8)

    def test_wo_sm90_split_mirror(self):
        # gemm/weight_only.cuh wo_sm90_plan_splits on 132 SMs: the counts tests/gemm/weight_only_sm90.cu pins
        want = {(17, 4096, 4096, 8): 4, (32, 4096, 4096, 4): 4, (64, 4096, 4096, 4): 4, (128, 4096, 4096, 4): 2,
                (128, 4096, 11008, 4): 2, (64, 11008, 4096, 4): 3, (256, 4096, 4096, 4): 1,
                (32, 1024, 4096, 4): 16, (17, 1024, 256, 8): 2, (1, 28672, 4096, 4): 4, (128, 14336, 4096, 4): 1}
        self.assertEqual({s: sass.wo_sm90_splits(*s) for s in want}, want)
        a = {"M": 32, "N": 4096, "K": 4096}
        self.assertIn("weight_only_sm90_kernel<half,4,", sass.KERNEL_MAP["BM_W4A16"][0](a, ()))
        self.assertEqual(sass.KERNEL_MAP["BM_W4A16"][1](a, ()), 32 * 4)
        a = {"M": 16, "N": 4096, "K": 4096}  # M <= 16: the mma.sync decode tile
        self.assertIn("weight_only_gemm_kernel<half,4,", sass.KERNEL_MAP["BM_W4A16"][0](a, ()))
        # the fitted slice term: rounds x slices a block (hardware.WO_SM90_SLICE_S_H100), from the H100 fit's rows
        k = "gemm::weight_only_sm90_kernel<half,4,gemm::WeightOnlySm90Config<64,6> >(gemm::WeightOnlySm90Params<half>)"
        self.assertEqual(sass.wo_sm90_slices(k, {"M": 256, "N": 28672, "K": 4096}, 896), (7 * 64, 64))
        self.assertEqual(sass.wo_sm90_slices(k, {"M": 32, "N": 4096, "K": 4096}, 32 * 4), (16, 64))
        self.assertEqual(sass.wo_sm90_slices("gemm::other<half>", {"M": 1, "N": 1, "K": 64}, 1), (0, 0))
        self.assertAlmostEqual(7 * 64 * hardware.WO_SM90_SLICE_S_H100[64], 134.4e-6)  # measured 135 us

    def test_default_kind_follows_the_dispatch(self):
        # Without a static row, a row that the launcher runs on the Hopper kernel gets the wgmma rate (it was
        # priced at the mma.sync rate: BM_FP8 at M = 4096 showed 44% of roofline instead of 15%).
        from model import predict
        kind = lambda base, m: predict.kind_from_sass(work.family_of(base), None, {"M": m, "N": 4096, "K": 4096})[0]
        self.assertEqual((kind("BM_W8A8", 64), kind("BM_W8A8", 65)), ("mma_i8", "wgmma_i8"))
        self.assertEqual((kind("BM_FP8", 64), kind("BM_FP8", 4096)), ("mma_f8_emulated", "wgmma_f8"))
        self.assertEqual((kind("BM_W4A16", 16), kind("BM_W4A16", 17)), ("mma_f16", "wgmma_f16"))
        self.assertEqual(kind("BM_W8A16", 128), "wgmma_f16")
        self.assertEqual(kind("BM_MixedInt8", 4096), "mma_i8")  # no Hopper kernel
        gpu = hardware.pick_gpu("NVIDIA H100 80GB HBM3")[0]
        fam = work.family_of("BM_FP8")
        a = {"M": 4096, "N": 4096, "K": 4096}
        roof = predict.roofline(work.work_of(fam, a, ()), gpu, kind("BM_FP8", 4096))
        self.assertLess(roof.time, 80e-6)  # 2 * 4096^3 at the QGMMA rate: about 69 us (207 us at HMMA's)

    def test_report_keeps_the_exponentials(self):
        # report.build rebuilds a row's work from its counters: the exponential count (the MUFU bound of the
        # attention rows) must survive it.
        import inspect
        res = results.load(SAMPLE)
        gpu, note = hardware.pick_gpu(res.meta["gpu"])
        orig, rebuilt = work.Work, []

        def spy(*a, **k):
            w = orig(*a, **k)
            if inspect.stack()[1].filename.endswith("report.py"):
                rebuilt.append(w)
            return w

        try:
            work.Work = spy
            report.build(res, gpu, note, None)
        finally:
            work.Work = orig
        self.assertTrue(any(w.exps > 0 for w in rebuilt))  # the prefill / decode rows of the sample

    def test_h200_and_unknown_gpu(self):
        self.assertEqual(hardware.pick_gpu("NVIDIA H200")[0].key, "h200")
        self.assertEqual(hardware.pick_gpu("NVIDIA H100 80GB HBM3")[0].key, "h100-sxm")
        g, note = hardware.pick_gpu("Some GPU")
        self.assertEqual(g.key, "h100-sxm")
        self.assertIn("unknown", note)

    def test_names_and_formulas(self):
        bn = names.parse("BM_PagedDecode<half, std::int8_t>/batch:64/kv_len:8192/heads:32/kv_heads:8/d:128/"
                         "page_size:16/csr:0/manual_time")
        self.assertEqual(bn.base, "BM_PagedDecode")
        self.assertEqual(bn.targs, ("half", "std::int8_t"))
        w = work.family_of(bn.base).work(bn.args(), bn.targs)
        cache = 64 * 8192 * 8 * 128
        self.assertEqual(w.bytes, 2 * cache + 2 * 64 * 8192 * 8 * 4 + 2 * 64 * 32 * 128 * 2)
        bn = names.parse("BM_TileGemmF16/16/4096/4096/manual_time")
        self.assertEqual(bn.args(work.family_of(bn.base).args), {"M": 16, "N": 4096, "K": 4096})
        bn = names.parse("BM_GptqGpu/N:4096/K:4096/iterations:1/real_time")
        self.assertEqual(bn.args(), {"N": 4096, "K": 4096})
        self.assertEqual(names.strip_aggregate("BM_DeviceCopy/MiB:1024/manual_time_median")[1], "median")
        # every counter in the sample agrees with the formulas (the sample was generated from them)
        res = results.load(SAMPLE)
        gpu, note = hardware.pick_gpu(res.meta["gpu"])
        rep = report.build(res, gpu, note, None)
        mism = [r.entry.name for r in rep.rows if any("!=" in n for n in r.notes)]
        self.assertEqual(mism, [])
        copy = next(e for e in res.entries if e.parsed.base == "BM_DeviceCopy" and e.collapsed)
        self.assertEqual(copy.collapsed, "median of 3 repetitions")


class TestBlockOrderModel(unittest.TestCase):
    def test_order_is_a_permutation_of_row_tiles_heaviest_first(self):
        # 5 row tiles x 7 pairs, sections of 3 pairs (the last one 1): each row tile once per pair.
        order = block_order.llmk_order(5, 7, 1, block_order.SECTION_BYTES // 3)
        self.assertEqual(sorted(order), sorted(list(range(5)) * 7))
        self.assertEqual(order[:3], [4, 4, 4])  # the first section's heaviest tiles first
        self.assertEqual(order[-1], 0)

    def test_heaviest_first_never_longer_on_the_benchmark_shapes(self):
        for heads, kv_heads, d, batch, seq in [(16, 16, 128, 4, 4096), (8, 8, 256, 1, 16384), (32, 8, 128, 32, 512)]:
            natural, ordered = block_order.causal_grid(batch, seq, heads, kv_heads, d)
            self.assertGreaterEqual(natural, 1.0)
            self.assertLessEqual(ordered, natural)


class TestRunTimeModel(unittest.TestCase):
    RUN = ROOT / "bench/results/2026-11-25-h100-80gb-hbm3-2bcc0c2"  # a real run, framework timing, min time 0.05

    def test_search_model_reproduces_the_recorded_iteration_counts(self):
        res = results.load(self.RUN)
        quant = [e for e in res.entries if e.file == "bench/bench_quant_gemm_cuda.json"]
        self.assertGreater(len(quant), 200)
        off = [e.name for e in quant if abs(run_time.framework_search(e.time_s)[-1] - e.iterations) > 0.3 * e.iterations]
        self.assertLessEqual(len(off), len(quant) // 50, off)
        # the fitted setup reproduces the binary's 220 s limit within 10%
        wall = sum(run_time.framework_wall(e.time_s) for e in quant)
        self.assertAlmostEqual(wall / 220.0, 1.0, delta=0.1)

    def test_one_pass_builds_the_data_once(self):
        for t in (2e-6, 30e-6, 1e-3, 20e-3):
            self.assertEqual(len(run_time.framework_search(t, 0.05)) > 1, t < 0.05)
            self.assertLess(run_time.one_pass_wall(t), run_time.framework_wall(t) + 1e-12)
            n = run_time.one_pass_samples(t)
            self.assertTrue(run_time.MIN_SAMPLES <= n <= run_time.MAX_SAMPLES)
        self.assertEqual(run_time.one_pass_samples(1.0), run_time.MIN_SAMPLES)
        self.assertEqual(run_time.one_pass_samples(1e-6), run_time.MAX_SAMPLES)
        # the model's sample bounds are the timer's
        timer = (ROOT / "bench/support/gpu_timer.hpp").read_text()
        for name, value in (("kOnePassMinSamples", run_time.MIN_SAMPLES), ("kOnePassMaxSamples", run_time.MAX_SAMPLES)):
            self.assertRegex(timer, rf"{name} = {value};")


class TestGemmRoundsModel(unittest.TestCase):
    def test_fit_recovers_the_fixed_cost_and_the_slope(self):
        # the sample's sweep was made from F and slope per (kernel, BN): the fit must give them back
        res = results.load(SAMPLE)
        gpu, _ = hardware.pick_gpu(res.meta["gpu"])
        fits = {(f.family, f.bn, f.cm, f.pp): f for f in gemm_rounds.fits_of(
            res.entries, {"wgmma_f16": gpu.tc_f16_dense, "wgmma_i8": gpu.tc_i8_dense})}
        self.assertEqual(len(fits), 7)
        for key, (f_us, slope, rounds) in {("BM_Sm90KSweepF16", 128, 1, 0): (4.0, 0.40, 8),
                                           ("BM_Sm90KSweepF16", 256, 1, 0): (5.0, 0.60, 4),
                                           ("BM_Sm90KSweepI8", 256, 1, 0): (7.0, 0.80, 4),
                                           ("BM_Sm90KSweepF16", 256, 2, 0): (5.0, 0.40, 4),
                                           ("BM_Sm90KSweepF16", 128, 1, 1): (1.0, 0.40, 8)}.items():
            self.assertAlmostEqual(fits[key].f_us, f_us, places=3)
            self.assertAlmostEqual(fits[key].slope_us, slope, places=4)
            self.assertEqual(fits[key].rounds, rounds)
        # 132 SMs x (128 + 128) x 128 bytes per 0.4 us
        self.assertAlmostEqual(fits[("BM_Sm90KSweepF16", 128, 1, 0)].l2_tbps, 132 * 256 * 128 / 0.4e-6 / 1e12, places=6)
        text = "\n".join(gemm_rounds.lines(list(fits.values())))
        self.assertIn("BM_Sm90KSweepF16 Cm 1: slope 256 / 128 = 1.50: L2-bound", text)
        self.assertIn("BM_Sm90KSweepI8 Cm 1: slope 256 / 128 = 2.00: tensor-bound", text)
        self.assertIn("BM_Sm90KSweepF16 BN 256: multicast slope / plain = 0.67 (L2 bytes 0.67x)", text)
        self.assertIn("BM_Sm90KSweepF16 BN 128 Cm 1: ping-pong F 1.00 vs cooperative 4.00 us, slope 1.00x", text)

    def test_one_k_is_not_a_fit(self):
        self.assertIsNone(gemm_rounds.fit([(4096, 4096, 1024, 1e-4)] * 3, "BM_Sm90KSweepF16", 128))


class TestPlots(SampleCopy):
    def test_plots(self):
        # plot_results.py installs matplotlib from PyPI when it is missing (CI does this); only an offline machine
        # without it skips, and says so.
        done = run(PLOT, self.folder, timeout=300)
        if done.returncode == 2 and importlib.util.find_spec("matplotlib") is None and "pip" in done.stdout + done.stderr:
            print("\n  test_plots: SKIPPED (matplotlib missing and pip could not install it)", file=sys.stderr)
            self.skipTest("matplotlib not installable here")
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout)
        plots = self.folder / "plots"
        pngs = sorted(plots.glob("*.png"))
        self.assertGreater(len(pngs), 10)
        self.assertTrue((plots / "BM_W4A16_vs_anchor.png").is_file())
        index = (plots / "index.md").read_text()
        for p in pngs:
            self.assertIn(f"({p.name})", index)


def _static_gates():
    spec = importlib.util.spec_from_file_location("static_gates", ROOT / "scripts/perf/static_gates.py")
    gates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gates)
    return gates


class TestStaticGateRules(unittest.TestCase):
    """Rules of scripts/perf/static_gates.py that need a ptxas note no planted kernel reproduces reliably."""

    def test_serialized_wgmma_fails(self):
        gates = _static_gates()
        fn = "_Z6kernelv"
        # as ptxas prints it: the note first (when the sm_90a pass starts), then the function's entry header
        report = (f"ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                  f"due to program dependence on compiler-inserted WG.AR in divergent path in the function '{fn}'\n"
                  f"ptxas info    : Compiling entry function '{fn}' for 'sm_90a'\n"
                  f"ptxas info    : Function properties for {fn}\n"
                  "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                  "ptxas info    : Used 168 registers\n")
        ptx = gates.parse_ptxas(report)
        self.assertIn("C7520", ptx[(fn, "sm_90a")]["wgmma_serial"])
        row = {"arch": "90a", "variant": "ndebug", "kernel": "kernel()", "loop": "none", "local": 0,
               **ptx[(fn, "sm_90a")]}
        failures = gates.check([row], {}, strict_missing=False)
        self.assertEqual(len(failures), 1, failures)
        self.assertTrue(failures[0].startswith("WGMMA-SERIAL sm_90a ndebug: kernel()"), failures[0])
        row["wgmma_serial"] = ""
        self.assertEqual(gates.check([row], {}, strict_missing=False), [])


    def test_targets_are_hard_ceilings(self):
        gates = _static_gates()
        targets = [(r"^k<64>", 4.6, "why")]
        row = {"arch": "80", "variant": "ndebug", "kernel": "k<64>(int)", "loop": "tc", "tc": "HMMA", "ipt": 4.6}
        self.assertEqual(gates.check_targets([row], targets), [])
        row["ipt"] = 4.61  # within the budgets' 10% tolerance, over the target
        failures = gates.check_targets([row], targets)
        self.assertEqual(len(failures), 1, failures)
        self.assertTrue(failures[0].startswith("TARGET sm_80 ndebug: k<64>(int): 4.61"), failures[0])
        row["kernel"] = "k<65>(int)"  # renamed: the target matches nothing
        self.assertTrue(gates.check_targets([row], targets)[0].startswith("TARGET-MISSING"))
        self.assertEqual(len(gates.TARGETS), 3)


class TestSdpaAnchor(unittest.TestCase):
    def test_a_failed_case_fails_the_exit_code(self):
        spec = importlib.util.spec_from_file_location("torch_sdpa", SDPA)
        sdpa = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sdpa)
        ok = sdpa.entry("SDPA_Decode<half>/x", "us", iterations=5, real_time=1.0)
        bad = sdpa.entry("SDPA_Decode<half>/y", "us", iterations=0, real_time=0.0, error_occurred=True,
                         error_message="RuntimeError: No available kernel")
        self.assertEqual(sdpa.exit_code([ok, ok]), 0)
        self.assertEqual(sdpa.exit_code([ok, bad]), 1)

    def test_list_needs_no_gpu(self):
        done = run(SDPA, "--list")
        self.assertEqual(done.returncode, 0, done.stderr)
        cases = done.stdout.split()
        self.assertIn("SDPA_Prefill<half>/batch:4/seq:4096/heads:16/kv_heads:16/d:128/causal:0/manual_time", cases)
        self.assertIn("SDPA_Prefill<half>/batch:1/seq:16384/heads:32/kv_heads:8/d:128/causal:1/manual_time", cases)
        self.assertIn("SDPA_Prefill<bfloat16>/batch:32/seq:512/heads:16/kv_heads:16/d:128/causal:0/manual_time", cases)
        self.assertIn("SDPA_Decode<half>/batch:8/kv_len:8192/heads:32/kv_heads:8/d:128/manual_time", cases)
        # exactly llmk's shapes, with the family prefix replaced
        llmk = set(shapes.prefill_cases()) | set(shapes.decode_cases())
        mapped = {c.replace("SDPA_Prefill", "BM_Prefill").replace("SDPA_Decode", "BM_Decode") for c in cases}
        self.assertEqual(mapped, llmk)
        self.assertEqual(len(cases), 60 + 28)
        only = run(SDPA, "--list", "--only", "^SDPA_Decode").stdout.split()
        self.assertEqual(len(only), 28)

    def test_without_gpu_exits_2_with_one_line(self):
        has_gpu = False
        if importlib.util.find_spec("torch") is not None:
            probe = run("-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)")
            has_gpu = probe.returncode == 0
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "sdpa.json"
            if has_gpu:  # a GPU machine: run no case, check the JSON shape
                done = run(SDPA, "--out", out, "--only", "^NO_SUCH_CASE$")
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(json.loads(out.read_text())["benchmarks"], [])
                print("\n  test_without_gpu_exits_2_with_one_line: a GPU is visible; ran zero cases instead",
                      file=sys.stderr)
                return
            done = run(SDPA, "--out", out)
            self.assertEqual(done.returncode, 2)
            err = [l for l in done.stderr.splitlines() if l.strip()]
            self.assertEqual(len(err), 1, done.stderr)
            self.assertTrue(err[0].startswith("torch_sdpa: "), err[0])
            self.assertFalse(out.exists())


class TestBenchmarkGuards(unittest.TestCase):
    """Every benchmark function is a function-try-block ending in LLMK_BENCH_CATCH (bench/support/bench_guard.hpp):
    an exception out of one benchmark errors its row instead of aborting the binary. The handler itself is tested
    by tests/perf/bench_guard.cpp."""

    def test_every_benchmark_function_is_guarded(self):
        import re
        definition = re.compile(r"^(?:inline |static )?void (BM_\w+)\(benchmark::State& state\)\s*(try\b)?",
                                re.M)
        seen, unguarded = 0, []
        for path in sorted(list((ROOT / "bench").glob("*.cu")) + list((ROOT / "bench/support").glob("*.hpp"))):
            for m in definition.finditer(path.read_text()):
                seen += 1
                if not m.group(2):
                    unguarded.append(f"{path.relative_to(ROOT)}: {m.group(1)}")
        self.assertGreater(seen, 40)
        self.assertEqual(unguarded, [], "benchmark functions without `try { ... } LLMK_BENCH_CATCH(state)`")


if __name__ == "__main__":
    unittest.main(verbosity=2)
