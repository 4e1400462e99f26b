#!/usr/bin/env bash
# check_gpu_resources.sh: the static GPU check (no GPU needed).
#
# Recompiles every CUDA translation unit of the _cuda targets (tests, benchmarks, examples) with the ptxas resource
# report (-Xptxas -v) and the PTX kept (--keep), for every architecture in CMAKE_CUDA_ARCHITECTURES, then
#   1. prints a table: kernel (demangled), arch, registers, static shared memory, stack frame, spill stores/loads;
#   2. FAILS if any kernel or device function whose demangled name contains `llmk::` spills (stores or loads > 0);
#   3. FAILS unless every kernel matching a pattern of scripts/tensor_core_kernels.txt (extended regexes matched
#      against demangled names, one a line, # comments) contains `mma.sync` in its PTX for every architecture, plus
#      every instruction substring named by a trailing " +X" token (e.g. +cp.async, +.s32.s8.s8.s32: the intended
#      mma variant), only on the architectures of a trailing " @89,90" when given; every pattern must match.
#
# Usage:
#   scripts/check_gpu_resources.sh                       the _cuda targets of build/ (configured if needed)
#   scripts/check_gpu_resources.sh --build-dir DIR
#   scripts/check_gpu_resources.sh --file X.cu [--arch "80;89;90"] [-- extra nvcc flags...]
#                                                         one standalone file (nvcc -std=c++20 -I include)
# Environment: JOBS (parallel nvcc runs, default 2), LLMK_BUILD_DIR.
# Writes the full table (tab-separated) to <work dir>/gpu_resources.tsv and keeps it when --keep-work is given.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mode=build
file=""
archs=""
keep_work=0
extra_flags=()
patterns_file="$LLMK_ROOT/scripts/tensor_core_kernels.txt"
while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --file) mode=file; file="$(realpath "$2")"; shift 2 ;;
    --arch) archs="$2"; shift 2 ;;
    --patterns) patterns_file="$2"; shift 2 ;;
    --keep-work) keep_work=1; shift ;;
    --) shift; extra_flags=("$@"); break ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "check_gpu_resources.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

NVCC="$(llmk_find_nvcc)"
if [[ -z "$NVCC" ]]; then
  echo "check_gpu_resources.sh: nvcc not found (CUDA toolkit at /usr/local/cuda expected)" >&2
  exit 1
fi
DEMANGLE=c++filt
command -v cu++filt >/dev/null 2>&1 && DEMANGLE=cu++filt
command -v "$DEMANGLE" >/dev/null 2>&1 || DEMANGLE=cat

WORK="$(mktemp -d "${TMPDIR:-/tmp}/llmk-gpucheck.XXXXXX")"
if ((keep_work)); then
  echo "work directory: $WORK"
else
  trap 'rm -rf "$WORK"' EXIT
fi

# ---------------------------------------------------------------------------------------------------------------------
# The compile commands: <directory>\t<source>\t<command> per line
# ---------------------------------------------------------------------------------------------------------------------
commands="$WORK/commands.tsv"
if [[ $mode == build ]]; then
  if [[ ! -f "$BUILD_DIR/compile_commands.json" ]] || ! grep -q 'nvcc' "$BUILD_DIR/compile_commands.json"; then
    echo "== configuring $BUILD_DIR (compile_commands.json with the _cuda targets)"
    llmk_configure "$BUILD_DIR" -DLLMK_BUILD_CUDA=ON >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; exit 1; }
  fi
  cmake -DCOMPILE_COMMANDS="$BUILD_DIR/compile_commands.json" -DOUTPUT="$commands" \
    -P "$LLMK_ROOT/cmake/llmk_cuda_commands.cmake"
  archs="$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
else
  [[ -f "$file" ]] || { echo "no such file: $file" >&2; exit 1; }
  archs="${archs:-80;89;90}"
  gencode=""
  IFS=';' read -r -a arch_list <<<"$archs"
  for a in "${arch_list[@]}"; do
    gencode+=" --generate-code=arch=compute_${a},code=[compute_${a},sm_${a}]"
  done
  quoted_extra=""
  for f in "${extra_flags[@]+"${extra_flags[@]}"}"; do quoted_extra+=" $(printf '%q' "$f")"; done
  printf '%s\t%s\t%s\n' "$PWD" "$file" \
    "$NVCC -std=c++20 -O2 -lineinfo --expt-relaxed-constexpr -I $(printf '%q' "$LLMK_ROOT/include")$gencode$quoted_extra -x cu -c $(printf '%q' "$file") -o unused.o" \
    >"$commands"
fi
n_units=$(wc -l <"$commands")
if ((n_units == 0)); then
  echo "check_gpu_resources.sh: no CUDA translation units found (is LLMK_BUILD_CUDA on in $BUILD_DIR?)" >&2
  exit 1
fi
echo "== check_gpu_resources: $n_units CUDA translation unit(s), architectures ${archs}, $JOBS at a time"

# ---------------------------------------------------------------------------------------------------------------------
# Compile each unit with -Xptxas -v --keep (object and dependency outputs go to the work directory)
# ---------------------------------------------------------------------------------------------------------------------
compile_unit() {
  local idx="$1" dir="$2" src="$3" cmd="$4"
  local out="$WORK/unit$idx"
  mkdir -p "$out/keep"
  local -a argv filtered
  set -f  # the command holds code=[compute_80,sm_80]: no globbing
  eval "argv=($cmd)"
  set +f
  local i=0 n=${#argv[@]}
  while ((i < n)); do
    case "${argv[i]}" in
      -o|-MF|-MT) i=$((i + 2)); continue ;;
      -MD|-MMD) i=$((i + 1)); continue ;;
    esac
    filtered+=("${argv[i]}")
    i=$((i + 1))
  done
  filtered+=(-o "$out/unit.o" -Xptxas -v --keep --keep-dir "$out/keep")
  echo "$src" >"$out/source"
  if (cd "$dir" && "${filtered[@]}") >"$out/log" 2>&1; then
    echo 0 >"$out/status"
  else
    echo $? >"$out/status"
  fi
}

idx=0
while IFS=$'\t' read -r dir src cmd; do
  idx=$((idx + 1))
  echo "   [$idx/$n_units] ${src#"$LLMK_ROOT"/}"
  compile_unit "$idx" "$dir" "$src" "$cmd" &
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
done <"$commands"
wait

failed_compiles=0
for ((i = 1; i <= idx; i++)); do
  if [[ "$(cat "$WORK/unit$i/status")" != 0 ]]; then
    echo "!! compile failed: $(cat "$WORK/unit$i/source")"
    grep -v '^ptxas info' "$WORK/unit$i/log" | head -n 60
    failed_compiles=1
  fi
done
((failed_compiles == 0)) || { echo "check_gpu_resources.sh: FAILED: CUDA compile errors"; exit 1; }

# ---------------------------------------------------------------------------------------------------------------------
# Parse the ptxas reports: mangled \t arch \t registers \t smem \t stack \t spill stores \t spill loads \t kind
# ---------------------------------------------------------------------------------------------------------------------
parse_ptxas() {
  awk '
    function emit(n) {
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, (arch == "" ? "?" : arch), regs[n] + 0, smem[n] + 0, stack[n] + 0,
             st[n] + 0, ld[n] + 0, (n in entry ? "kernel" : "function")
    }
    /ptxas info +: [0-9]+ bytes gmem/ { arch = ""; npending = 0 }
    /Compiling entry function/ {
      n = $0; sub(/.*Compiling entry function \047/, "", n); sub(/\047.*/, "", n)
      a = $0; sub(/.*for \047sm_/, "", a); sub(/\047.*/, "", a)
      arch = a; entry[n] = 1; current = n
      for (p = 1; p <= npending; ++p) emit(pending[p])
      npending = 0
      next
    }
    /Function properties for / {
      n = $0; sub(/.*Function properties for /, "", n); gsub(/[ \t\r]+$/, "", n); current = n
      if (!(n in entry)) { props_for_func = n } else { props_for_func = "" }
      next
    }
    /bytes stack frame/ {
      line = $0
      if (match(line, /[0-9]+ bytes stack frame/)) stack[current] = substr(line, RSTART, RLENGTH) + 0
      if (match(line, /[0-9]+ bytes spill stores/)) st[current] = substr(line, RSTART, RLENGTH) + 0
      if (match(line, /[0-9]+ bytes spill loads/)) ld[current] = substr(line, RSTART, RLENGTH) + 0
      if (props_for_func != "") {  # a non-entry function: no "Used" line follows
        if (arch == "") pending[++npending] = current; else emit(current)
        props_for_func = ""
      }
      next
    }
    /ptxas info +: Used [0-9]+ registers/ {
      line = $0
      if (match(line, /Used [0-9]+ registers/)) { r = substr(line, RSTART + 5, RLENGTH - 5); regs[current] = r + 0 }
      if (match(line, /[0-9]+ bytes smem/)) smem[current] = substr(line, RSTART, RLENGTH) + 0
      if (current in entry) emit(current)
      next
    }
  ' "$@"
}

raw="$WORK/raw.tsv"
: >"$raw"
for ((i = 1; i <= idx; i++)); do
  parse_ptxas "$WORK/unit$i/log" >>"$raw"
done
# One row per (symbol, arch): the same instantiation compiled in several units reports the same numbers.
sort -u -t $'\t' -k1,2 "$raw" >"$WORK/rows.tsv"
cut -f1 "$WORK/rows.tsv" | "$DEMANGLE" >"$WORK/demangled.txt"
paste "$WORK/demangled.txt" "$WORK/rows.tsv" >"$WORK/gpu_resources.tsv"
# columns: demangled, mangled, arch, regs, smem, stack, spill stores, spill loads, kind

if [[ ! -s "$WORK/gpu_resources.tsv" ]]; then
  echo "check_gpu_resources.sh: no kernels found in the ptxas reports"
else
  echo
  awk -F'\t' '
    BEGIN { printf "%-6s %5s %9s %7s %8s %8s  %s\n", "arch", "regs", "smem(B)", "stack", "spill-st", "spill-ld", "kernel" }
    {
      name = $1; if ($9 == "function") name = "[device fn] " name
      if (length(name) > 150) name = substr(name, 1, 147) "..."
      flag = (($7 > 0 || $8 > 0) ? "  <-- SPILLS" : "")
      regs = ($9 == "function" ? "-" : $4)
      printf "sm_%-3s %5s %9d %7d %8d %8d  %s%s\n", $3, regs, $5, $6, $7, $8, name, flag
    }' "$WORK/gpu_resources.tsv"
  echo "(smem: static shared memory only; llmk kernels use dynamic shared memory, sized at launch)"
fi

status=0
spills="$(awk -F'\t' 'index($1, "llmk::") > 0 && ($7 > 0 || $8 > 0)' "$WORK/gpu_resources.tsv")"
if [[ -n "$spills" ]]; then
  echo
  echo "!! llmk kernels that spill registers:"
  awk -F'\t' '{ printf "   sm_%s: %s: %d bytes spill stores, %d bytes spill loads (%d registers)\n", $3, $1, $7, $8, $4 }' \
    <<<"$spills"
  status=1
fi

# ---------------------------------------------------------------------------------------------------------------------
# Tensor-core kernels must contain mma.sync in their PTX
# ---------------------------------------------------------------------------------------------------------------------
# PTX entries: mangled \t arch \t the distinct mma.sync / cp.async instruction names of the body (space-separated)
ptx_entries="$WORK/ptx_entries.tsv"
: >"$ptx_entries"
while IFS= read -r ptx; do
  arch="$(basename "$ptx" | sed -n 's/.*\.compute_\([0-9]*[a-z]*\)\.ptx$/\1/p')"
  [[ -z "$arch" ]] && arch="?"
  awk -v arch="$arch" '
    /^\.(visible|weak)?[ \t]*\.entry[ \t]/ || /^\.entry[ \t]/ {
      n = $0; sub(/.*\.entry[ \t]+/, "", n); sub(/\(.*/, "", n); gsub(/[ \t]/, "", n); name = n; ops = " "
      depth = 0; started = 0; next
    }
    name != "" && /(mma\.sync|cp\.async)/ {
      line = $0
      while (match(line, /(mma\.sync|cp\.async)[.a-z0-9]*/)) {
        op = substr(line, RSTART, RLENGTH)
        if (index(ops, " " op " ") == 0) ops = ops op " "
        line = substr(line, RSTART + RLENGTH)
      }
    }
    name != "" {  # the body ends where its braces balance (inline asm adds nested { } blocks)
      line = $0; opens = gsub(/{/, "{", line); closes = gsub(/}/, "}", line)
      depth += opens - closes; if (opens > 0) started = 1
      if (started && depth <= 0) { printf "%s\t%s\t%s\n", name, arch, ops; name = "" }
    }
  ' "$ptx" >>"$ptx_entries"
done < <(find "$WORK" -name '*.ptx' | sort)
sort -u "$ptx_entries" -o "$ptx_entries"
cut -f1 "$ptx_entries" | "$DEMANGLE" | paste - "$ptx_entries" >"$WORK/ptx_demangled.tsv"

if [[ -f "$patterns_file" ]]; then
  echo
  echo "== tensor-core kernels (${patterns_file#"$LLMK_ROOT"/}): mma.sync (and cp.async where asked) in the PTX"
  while IFS= read -r pattern || [[ -n "$pattern" ]]; do
    pattern="${pattern%%#*}"
    pattern="$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<<"$pattern")"
    [[ -z "$pattern" ]] && continue
    # Required instruction substrings: "mma.sync" always, plus every " +X" token at the end of the line.
    # A trailing " @89,90" limits the check to those architectures (fp8 kernels are traps on sm_80).
    required=(mma.sync)
    only_archs=""
    while [[ "$pattern" =~ ^(.*[^[:space:]])[[:space:]]+([+@])([^[:space:]]+)$ ]]; do
      if [[ "${BASH_REMATCH[2]}" == "+" ]]; then required+=("${BASH_REMATCH[3]}"); else only_archs=",${BASH_REMATCH[3]},"; fi
      pattern="${BASH_REMATCH[1]}"
    done
    matches="$(LLMK_PATTERN="$pattern" awk -F'\t' '$1 ~ ENVIRON["LLMK_PATTERN"]' "$WORK/ptx_demangled.tsv")"
    if [[ -z "$matches" ]]; then
      echo "!! pattern '$pattern' matches no kernel in the CUDA targets"
      status=1
      continue
    fi
    while IFS=$'\t' read -r demangled _mangled arch ops; do
      [[ -n "$only_archs" && "$only_archs" != *",$arch,"* ]] && continue
      short="$demangled"
      ((${#short} > 150)) && short="${short:0:147}..."
      missing=""
      for r in "${required[@]}"; do
        [[ "$ops" == *"$r"* ]] || missing+=" $r"
      done
      if [[ -n "$missing" ]]; then
        echo "!! MISSING$missing  compute_$arch  $short"
        status=1
      else
        echo "   ok       compute_$arch  $short"
      fi
    done <<<"$matches"
  done <"$patterns_file"
fi

echo
if ((status == 0)); then
  echo "check_gpu_resources: PASSED (no llmk kernel spills; tensor-core kernels use mma.sync)"
else
  echo "check_gpu_resources: FAILED"
fi
exit "$status"
