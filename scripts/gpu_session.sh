#!/usr/bin/env bash
# One command for a lent GPU machine (no network there): set up what it lacks from .gpu_carry/, run the CUDA tests and
# the GPU benchmark, and write every result under $OUT (at most 8 files), inside one 10-minute device call.
#   bash scripts/gpu_session.sh --prepare   # here, with network: wheels + fonts into .gpu_carry/ (git-ignored)
#   bash scripts/gpu_session.sh             # on the GPU machine (the device tool's run, carry [".gpu_carry"])
#   bash scripts/gpu_session.sh --dry-run   # CPU rehearsal: every stage, tiny sizes, same files under $OUT
# Stages and their hard limits (seconds; env SETUP_S, TESTS_S, BENCH_S): setup 60, CUDA tests 270, benchmark 210;
# the rest of the 600 s goes to start-up and the copies. $OUT gets: summary.txt (one line per stage: name, exit code,
# seconds, limit), env.txt (GPU, driver, torch), tests.log, tests.xml (JUnit), bench_gpu.log, bench_gpu.json.
# Exit code: 0 when every stage passed, else the first failing stage's code (the files come back either way).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARRY="$ROOT/.gpu_carry"
MODE=run
case "${1:-}" in
  --prepare) MODE=prepare ;;
  --dry-run) MODE=dry ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "gpu_session.sh: unknown option $1 (use --prepare, --dry-run or nothing)" >&2; exit 2 ;;
esac
PY="${PYTHON:-python3}"
[ "$MODE" != run ] && [ -z "${PYTHON:-}" ] && [ -x "$ROOT/.venv/bin/python" ] && PY="$ROOT/.venv/bin/python"
# What is carried to the GPU image (python 3.12, x86-64) is what its stages use and it lacks: the lmdb wheel and the
# DejaVu and Liberation faces the tests and the benchmark render their words in. Everything else the suite needs is
# already there (/work/.library/device/KINDS.md lists pytest, pytest-timeout, onnx, onnxruntime, pyyaml, tqdm,
# scikit-image, ...). Not carried: jieba (19 MiB, only synthetic Chinese lines use it, no stage here does) and the
# other Latin and CJK faces - the device call moves at most 64 MiB, the working tree (committed weights) included.
WHEELS="lmdb==1.7.5"
FONT_PACKAGES="fonts-dejavu-core fonts-liberation2"
MAX_TREE_MIB=60               # the device call moves at most 64 MiB (working tree + carried paths); 4 to spare

prepare() {
  rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" || return 1
  "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$CARRY/wheels" $WHEELS || return 1
  local files
  files="$(for p in $FONT_PACKAGES; do dpkg -L "$p" 2>/dev/null; done | grep -E '\.(ttf|otf|ttc)$' | sort -u \
           | while read -r f; do [ -f "$f" ] && echo "$f"; done)"
  [ -n "$files" ] || { echo "gpu_session.sh: no font files found (run scripts/setup.sh first)" >&2; return 1; }
  # paths kept (tar drops the leading /): unpacked at / on the GPU machine, where find_fonts and the tests look
  echo "$files" | tar -cf - -T - 2>/dev/null | xz -T0 -6 > "$CARRY/fonts.tar.xz" || return 1
  local tree carry
  tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  carry=$(du -sb "$CARRY" | cut -f1)
  echo "gpu_session.sh: .gpu_carry $((carry / 1048576)) MiB ($(ls "$CARRY/wheels" | tr '\n' ' ')fonts.tar.xz), working" \
       "tree $((tree / 1048576)) MiB"
  if [ $(((tree + carry) / 1048576)) -gt "$MAX_TREE_MIB" ]; then
    echo "gpu_session.sh: tree + .gpu_carry exceed $MAX_TREE_MIB MiB; the device call would be refused: carry fewer" \
         "fonts (FONT_PACKAGES) or commit fewer weights" >&2
    return 1
  fi
}

if [ "$MODE" = prepare ]; then prepare; exit $?; fi

if [ -z "${OUT:-}" ]; then OUT="$ROOT/runs/gpu_session"; mkdir -p "$OUT"; fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
FIRST_FAIL=0
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHON="$PY" MODE CARRY PY

stage() {  # stage NAME LIMIT_S LOG COMMAND...: run under a hard limit, log its output, record the outcome
  local name=$1 limit=$2 log=$3 t0 rc
  shift 3
  t0=$(date +%s)
  echo "== $name (limit ${limit} s)" | tee -a "$log"
  if declare -F "$1" > /dev/null; then  # a function of this script: run it in a child bash under the limit
    timeout -k 10 "$limit" bash -c "$(declare -f "$1"); $1" >> "$log" 2>&1
  else
    timeout -k 10 "$limit" "$@" >> "$log" 2>&1
  fi
  rc=$?
  echo "$name rc=$rc seconds=$(( $(date +%s) - t0 )) limit=$limit" | tee -a "$SUMMARY"
  [ $rc -eq 124 ] && echo "$name: stopped at its limit of $limit s" | tee -a "$SUMMARY"
  [ $rc -ne 0 ] && [ $FIRST_FAIL -eq 0 ] && FIRST_FAIL=$rc
  return 0
}

setup() {  # wheels into /tmp/crnn-site (on PYTHONPATH), fonts unpacked at / (the GPU machine only)
  local site=/tmp/crnn-site platform=()
  if [ "$MODE" = dry ]; then  # check that the wheels install for the GPU image (python 3.12, x86-64), aside
    site=$(mktemp -d)
    platform=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
              --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
  fi
  if ls "$CARRY"/wheels/*.whl > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "${platform[@]}" "$CARRY"/wheels/*.whl || return 1
    echo "installed into $site: $(ls "$site" | tr '\n' ' ')"
    [ "$MODE" = dry ] && rm -rf "$site"
  else
    echo "no wheels in $CARRY/wheels (run bash scripts/gpu_session.sh --prepare here and carry .gpu_carry)"
  fi
  if [ -f "$CARRY/fonts.tar.xz" ]; then
    if [ "$MODE" = run ]; then tar -xJf "$CARRY/fonts.tar.xz" -C / || return 1
    else echo "dry run: $(tar -tJf "$CARRY/fonts.tar.xz" | wc -l) font files would be unpacked at /"; fi
  fi
  "$PY" - <<'EOF'
import importlib, torch
for name in ("lmdb", "yaml", "tqdm", "pytest", "pytest_timeout", "onnx", "onnxruntime", "skimage", "PIL"):
    try:
        importlib.import_module(name)
        print(f"{name}: ok")
    except ImportError as e:
        print(f"{name}: MISSING ({e})")
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())
EOF
}

export PYTHONPATH="/tmp/crnn-site:$PYTHONPATH"
{
  echo "mode: $MODE; $(date -u '+%Y-%m-%d %H:%M:%S UTC'); commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
  nvidia-smi 2>&1 || echo "(no nvidia-smi)"
  "$PY" -c 'import torch, platform; print("python", platform.python_version(), "torch", torch.__version__,
"cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "devices",
[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])'
  nproc
} > "$OUT/env.txt" 2>&1

stage setup "${SETUP_S:-60}" "$OUT/tests.log" setup
cd "$ROOT" || exit 1
# every test marked cuda, wherever it lives (tests/test_cuda.py and the few elsewhere); on the CPU rehearsal the same
# selection collects and each of them skips with its reason
if [ "$MODE" = run ]; then
  stage cuda_tests "${TESTS_S:-270}" "$OUT/tests.log" "$PY" -m pytest -m cuda tests/ -v -rs -p no:cacheprovider \
    --timeout 240 --junitxml="$OUT/tests.xml"
  stage bench_gpu "${BENCH_S:-210}" "$OUT/bench_gpu.log" "$PY" benchmarks/bench_gpu.py --out "$OUT/bench_gpu.json"
else  # the rehearsal: the same stages on the CPU, sized to seconds
  stage cuda_tests "${TESTS_S:-120}" "$OUT/tests.log" "$PY" -m pytest -m cuda tests/ -v -rs -p no:cacheprovider \
    --junitxml="$OUT/tests.xml"
  stage bench_gpu "${BENCH_S:-120}" "$OUT/bench_gpu.log" "$PY" benchmarks/bench_gpu.py --quick \
    --sections peak steps --out "$OUT/bench_gpu.json"
fi
tail -n 40 "$OUT/bench_gpu.log"
cat "$SUMMARY"
exit $FIRST_FAIL
