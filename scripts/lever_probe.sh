#!/usr/bin/env bash
# What one lever of the Chinese data engine is worth (issue 43: "measure each lever on the new yardstick's learning
# curve"): two short runs from the committed pack, the same lines in the same order, that differ only by the lever.
#   bash scripts/lever_probe.sh NAME STEPS key=value [key=value ...]   # e.g. elastic 4000 data.synth_elastic=0.3
#   bash scripts/lever_probe.sh --dry-run NAME STEPS key=value ...      # print the two commands, run nothing
#   bash scripts/lever_probe.sh --val trad_print NAME STEPS key=value ... # the lever arm validates on a second set
#   AMP=bf16 bash scripts/lever_probe.sh NAME STEPS key=value ...       # both arms in one precision, not measured
#   MODEL=en bash scripts/lever_probe.sh NAME STEPS key=value ...       # the English model (issue 44), see below
#   bash scripts/lever_probe.sh NAME 1h key=value ...                    # arms of equal CPU-hours instead (below)
# Both arms: configs/shipped_zh.yaml from weights/crnn_zh_lines.pt (weights only, a fresh optimizer), a constant
# learning rate of 2e-4 after 100 warm-up steps, STEPS steps, validation every STEPS/4 steps on the 1,200 lines of the
# development faces (data/zh_faces/dev_print, scripts/zh_benchmark.py builds it). The base arm
# (runs/probe/base_STEPS_nNPROC) is run once and shared by every probe of that length and process count; the lever
# arm is runs/probe/NAME_nNPROC. Ends with both arms' CER on
# the development faces at every validation, side by side. A finished arm is kept while the pack, the config, its
# command and the faces it draws from (crnn.data.fonts.faces_stamp: font files per source - system folders, the
# web-font cache, its Latin web faces - and a hash of their names) are the ones it was trained from (its
# probe.stamp), trained again when any differs. PROBE_DIR: where the
# arms live (runs/probe). Never beside another CPU-heavy job (the arms would not see the same machine); on a GPU the
# two arms take minutes (NPROC=1).
# --val SET: the lever arm also validates on data/zh_faces/SET (a set of scripts/zh_benchmark.py, built there with
# 1,200 lines), e.g. trad_print for model.charset=zh_gb2312_trad: what the lever gains where the base arm cannot be
# scored (its alphabet lacks those labels' characters), beside what it costs on the development faces. Validation
# does not change the lines trained on, so the base arm is still the shared one.
# MODEL=en: the same for the English model: configs/shipped_en.yaml from weights/crnn_en.pt, validation on the two
# real development sets (data/en_dev and the ICDAR 2015 block data/ic15_dev: python -m crnn.data.en_dev builds both
# from the shared crops), arms in runs/probe_en; it ends with both arms' word accuracy on each, case-sensitive exact
# and 36-class (--val is for zh only).
# LR: the arms' learning rate (default 2e-4), constant after 100 warm-up steps unless SCHEDULE=cosine: a cosine from
# LR down to the config's train.min_lr_ratio over each arm's steps, or over its CPU budget (train.schedule_over:
# cpu_hours), so that each arm ends its decay, and is scored, at its best; the base arm of a cosine is its own
# (runs/probe/base_STEPS_cos_nNPROC).
# A budget such as 1h or 0.75h in place of STEPS gives each arm that many CPU-hours (every process and its loader
# workers, train.cpu_hours) instead of a step count: the way to weigh a lever that changes what a step costs (a wider
# or deeper network) against the base trained on for the same CPU time. Validation at every quarter of the budget;
# the table joins the arms on CPU-hours (each row names its steps). The precision is pinned (bf16 where the CPU has
# native bf16 kernels, else off; AMP= overrides), the arms' base is runs/probe/base_1h_nNPROC. A lever arm that
# starts from another file (train.init_weights=grown.pt, e.g. from tools/grow_cnn.py) is retrained when that file
# changes. Each arm's probe.record names the code commit, the starting files' hashes, the CPU, the faces and the
# precision. An arm cut short (Ctrl-C, a session's end: it saves last.pt) resumes from there when the probe is run
# again on a CPU of the same model (its name, family/model and bf16 flags, as the curve names it), with the same
# pack, config, command and faces; elsewhere it starts afresh.
# BASE_CURVE=FILE: the base arm is not trained here; its rows are FILE's (a curve.tsv of the same budget, schedule,
# process count and CPU model, e.g. one a committed table keeps), and the table says where they came from. For a
# lever arm that alone fills a session (48 px lines); the precision in FILE's amp column must be the lever arm's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=.venv/bin/python
DRY="" EXTRA=""
usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --val)
      [[ "${2:-}" =~ ^[a-z_]+$ ]] || { echo "lever_probe: --val takes a set of scripts/zh_benchmark.py" >&2; exit 2; }
      EXTRA=$2
      shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 3 ] || usage
NAME=$1 STEPS=$2
shift 2
[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] && [[ "$NAME" != base_* ]] || { echo "lever_probe: bad NAME $NAME" >&2; exit 2; }
HOURS="" LAST="step $STEPS"
if [[ "$STEPS" =~ ^[0-9]*\.?[0-9]+h$ ]]; then
  HOURS=${STEPS%h} LAST="its ${STEPS%h} CPU-hours spent"
  awk -v h="$HOURS" 'BEGIN {exit !(h > 0)}' || { echo "lever_probe: a CPU budget must be above 0h" >&2; exit 2; }
else
  [[ "$STEPS" =~ ^[0-9]+$ ]] && [ "$STEPS" -ge 4 ] ||
    { echo "lever_probe: STEPS must be a number >= 4 or a CPU budget such as 1h" >&2; exit 2; }
fi
for kv in "$@"; do
  [[ "$kv" == *=* ]] || { echo "lever_probe: expected key=value, got $kv" >&2; exit 2; }
done
case "${MODEL:-zh}" in
  zh) PACK=weights/crnn_zh_lines.pt CONFIG=configs/shipped_zh.yaml DEV=data/zh_faces/dev_print
      PROBES=${PROBE_DIR:-runs/probe} ;;
  en) PACK=weights/crnn_en.pt CONFIG=configs/shipped_en.yaml DEV=data/en_dev,data/ic15_dev
      PROBES=${PROBE_DIR:-runs/probe_en}
      [ -z "$EXTRA" ] || { echo "lever_probe: --val is for MODEL=zh" >&2; exit 2; } ;;
  *) echo "lever_probe: MODEL must be zh or en, got ${MODEL}" >&2; exit 2 ;;
esac
[[ "${LR:-2.0e-4}" =~ ^[0-9.eE+-]+$ ]] || { echo "lever_probe: LR must be a number, got $LR" >&2; exit 2; }
case "${SCHEDULE:-constant}" in
  constant) SCHED=(train.schedule=constant) TAG="" ;;
  cosine) SCHED=(train.schedule=cosine) TAG=_cos ;;
  *) echo "lever_probe: SCHEDULE must be constant or cosine, got ${SCHEDULE}" >&2; exit 2 ;;
esac
# AMP: the arms' precision (default auto: measured at each arm's start, which a loaded machine can tip; pin it,
# e.g. AMP=bf16, when anything else runs); the two arms must train in the same one (checked below)
if [ -n "$HOURS" ]; then  # equal CPU time: the precision pinned, not measured at each arm's start
  grep -qw -e avx512_bf16 -e amx_bf16 /proc/cpuinfo 2>/dev/null && PINNED=bf16 || PINNED=off
  QUARTER=$(awk -v h="$HOURS" 'BEGIN {print h / 4}')
  LENGTH=(train.steps=100000000 "train.cpu_hours=$HOURS" "train.val_every_cpu_hours=$QUARTER" train.val_every=0
          "train.amp=${AMP:-$PINNED}")
  [ -z "$TAG" ] || SCHED+=(train.schedule_over=cpu_hours)
else
  LENGTH=("train.steps=$STEPS" "train.val_every=$((STEPS / 4))" "train.amp=${AMP:-auto}")
fi
COMMON=(--config "$CONFIG" "train.init_weights=$PACK" train.resume=none "${SCHED[@]}"
        "train.lr=${LR:-2.0e-4}" train.warmup_steps=100 "${LENGTH[@]}")
SECOND=${EXTRA:+data/zh_faces/$EXTRA}
NP=${NPROC:-2}  # processes (x 32 lines a batch): arms are comparable only at the same count
BASE=$PROBES/base_${STEPS}${TAG}_n$NP
BASE_ROWS=$BASE/curve.tsv
if [ -n "${BASE_CURVE:-}" ]; then
  head -1 "$BASE_CURVE" 2>/dev/null | grep -q $'^step\tlines_seen\tcpu_seconds\twall_seconds\tset\tcer' ||
    { echo "lever_probe: BASE_CURVE=$BASE_CURVE is not a curve.tsv (its first line names step, lines_seen," \
        "cpu_seconds, wall_seconds, set, cer...); give an arm's curve.tsv or unset it to train the base arm" >&2; exit 2; }
  BASE_ROWS=$BASE_CURVE
fi
ARM=$PROBES/${NAME}_n$NP
# what an arm was trained from: the pack's and the config's contents, the arm's command line and the faces its lines
# are drawn in. A finished arm is kept only when its stamp matches: after a sitting packs new weights, the recipe
# changes (as when a lever is kept) or web faces are fetched, the shared base arm is trained again instead of being
# compared, silently, with a lever arm from another start or other faces
hash16() { sha256sum "$1" 2>/dev/null | cut -c1-16; }
faces() {  # the faces the arms draw from, listed once per probe (both arms render with this machine's fonts)
  [ -x "$PY" ] || { echo "faces unknown (no $PY)"; return 0; }
  "$PY" -c 'from crnn.data.fonts import faces_stamp; print(faces_stamp())'
}
FACES=$(faces) || { echo "lever_probe: cannot list the faces (crnn.data.fonts.faces_stamp failed)" >&2; exit 1; }
starts() {  # the files an arm's command starts from: the pack, or a train.init_weights= that overrides it
  local kv last=$PACK
  for kv in "$@"; do [[ "$kv" != train.init_weights=* ]] || last=${kv#train.init_weights=}; done
  echo "$last"
}
stamp() {
  local start
  start=$(starts "$@")
  printf 'pack %s\nconfig %s\ncommand %s\n%s\n' "$(hash16 "$PACK")" "$(hash16 "$CONFIG")" "$*" "$FACES"
  [ "$start" == "$PACK" ] || printf 'start %s %s\n' "$start" "$(hash16 "$start")"
}
finished() {  # OUT SET: the arm's curve has its last row for SET (step STEPS, or the CPU budget spent)
  [ -f "$1/curve.tsv" ] || return 1
  if [ -n "$HOURS" ]; then
    awk -F'\t' -v h="$HOURS" -v d="$2" '$5 == d && $3 >= h * 3600 {f = 1} END {exit !f}' "$1/curve.tsv"
  else
    awk -F'\t' -v s="$STEPS" -v d="$2" '$5 == d && $1 == s {f = 1} END {exit !f}' "$1/curve.tsv"
  fi
}
# The CPU as crnn.engine.curve.cpu_name() names it (and the curve's cpu column): the model name alone ("AMD EPYC" on
# some clouds) does not tell a Zen 4 with native bf16 from an AVX2-only EPYC, whose CPU-hours are worth half as much.
cpu_here() {
  awk -F'\t*: *' -v n="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)" '
    /^$/ { exit }
    $1 == "model name" && name == "" { name = $2 }
    $1 == "cpu family" && fam == "" { fam = $2 }
    $1 == "model" && mod == "" { mod = $2 }
    $1 == "flags" && flags == "" { flags = " " $2 " " }
    END {
      x = (fam != "" && mod != "") ? "family " fam " model " mod : ""
      if (flags ~ / amx_tile /) x = x (x ? ", " : "") "AMX"
      if (flags ~ / avx512_bf16 /) x = x (x ? ", " : "") "avx512_bf16"
      else if (flags ~ / avx512f /) x = x (x ? ", " : "") "AVX-512"
      if (flags ~ / avx2 / && flags !~ / avx512f /) x = x (x ? ", " : "") "AVX2 only"
      printf "%s (%s; %s CPUs)\n", name, x, n
    }' /proc/cpuinfo
}
run() {  # OUT VALS [overrides...]: one arm, unless its curve already has the last row
  local out=$1 vals=$2
  shift 2
  local cmd=(scripts/train_ddp.sh --nproc "$NP" "${COMMON[@]}" "data.val=[$vals]" "train.output_dir=$out" "$@")
  local want
  want=$(stamp "${cmd[@]}")
  # done: the last step's row of its last validation set, from this pack, config, command and faces
  if finished "$out" "${vals##*,}"; then
    if [ "$(cat "$out/probe.stamp" 2>/dev/null)" == "$want" ]; then
      echo "lever_probe: $out is done ($LAST in its curve, same pack, config, command and faces); kept" >&2
      [ -z "$DRY" ] || echo "${cmd[*]}"
      return 0  # (a bare return would pass on the test's status: 1, which set -e turns into a silent exit)
    fi
    echo "lever_probe: $out was trained from another pack, config, command or faces than now ($out/probe.stamp;" \
      "faces now: ${FACES#faces }); it is trained again" >&2
  fi
  # an arm cut short (a session's end, Ctrl-C: it saved last.pt) resumes where it stopped, on a CPU of the same model
  # only (one table, one machine); anything else starts it afresh
  local here resume=()
  here=$(cpu_here)
  if [ -f "$out/last.pt" ] && [ "$(cat "$out/probe.pending" 2>/dev/null)" == "$want"$'\n'"cpu $here" ]; then
    resume=(train.resume=auto)
    echo "lever_probe: $out was cut short (its last.pt, same pack, config, command, faces and CPU); it resumes" >&2
  fi
  if [ -n "$DRY" ]; then echo "${cmd[*]}${resume:+ ${resume[*]}}"; return 0; fi
  if [ -z "${resume[*]}" ]; then
    rm -rf "$out"
    mkdir -p "$out"
    local start commit
    start=$(starts "${cmd[@]}")
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
    printf 'commit %s%s\nstart %s %s\ncpu %s\ncommand %s\n%s\n' "$commit" \
      "$([ -z "$(git status --porcelain crnn configs scripts tools 2>/dev/null)" ] || echo ' (with uncommitted changes)')" \
      "$start" "$(hash16 "$start")" "$here" "${cmd[*]}" "$FACES" > "$out/probe.record"
  fi
  printf '%s\ncpu %s\n' "$want" "$here" > "$out/probe.pending"
  echo "lever_probe: $out (${HOURS:+$HOURS CPU-hours}$([ -n "$HOURS" ] || echo "$STEPS steps")): log in $out/train.log"
  if ! "${cmd[@]}" "${resume[@]}" >> "$out/train.log" 2>&1 || ! finished "$out" "${vals##*,}"; then
    echo "lever_probe: $out stopped before its end; see $out/train.log (run the probe again to resume it)" >&2
    exit 1
  fi
  echo "$want" > "$out/probe.stamp"
  rm -f "$out/probe.pending"
}
if [ "${MODEL:-zh}" == en ]; then
  for set in ${DEV//,/ }; do  # from the shared crops; says so without them
    [ -n "$DRY" ] || [ -f "$set/gt.txt" ] || "$PY" -m crnn.data.en_dev --set "$(basename "$set")"
  done
else
  for set in dev_print $EXTRA; do
    if [ -z "$DRY" ] && [ ! -f "data/zh_faces/$set/gt.txt" ]; then
      "$PY" scripts/zh_benchmark.py --build-only --sets "$set" --num 1200 --work data/zh_faces
    fi
  done
fi
if [ -z "${BASE_CURVE:-}" ]; then run "$BASE" "$DEV"; else
  echo "lever_probe: the base arm is not trained here: its rows are $BASE_CURVE's (BASE_CURVE)" >&2
fi
run "$ARM" "$DEV${SECOND:+,$SECOND}" "$@"
[ -n "$DRY" ] && exit 0
precision() { grep -m1 -o "train.amp=[a-z0-9]* -> [a-z0-9]*\|mixed precision: [a-z0-9]*" "$1/train.log" || echo "as set"; }
if [ -n "${BASE_CURVE:-}" ]; then
  # the given rows' precision (the curve's amp column) against the word the arm's log ends its precision with
  had=$(awk -F'\t' 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "amp") c = i; next} c {a = $c} END {print a}' \
        "$BASE_CURVE")
  arm_amp=$(precision "$ARM" | awk '{print $NF}')
  if [ -z "$had" ] || [ "$had" != "$arm_amp" ]; then
    echo "lever_probe: $BASE_CURVE trained in ${had:-an unnamed precision (no amp column)}, $ARM in $arm_amp;" \
      "compare arms of one precision (AMP=)" >&2
    exit 1
  fi
elif [ "$(precision "$BASE")" != "$(precision "$ARM")" ]; then
  echo "lever_probe: the arms trained in different precisions ($BASE: $(precision "$BASE"); $ARM:" \
    "$(precision "$ARM")); rerun both with AMP=bf16 or AMP=off" >&2
  exit 1
fi
# rows: by step, or (a CPU budget) by the quarter of the budget they were validated at, with their steps
rows() {  # CURVE SET COLUMN: "key<TAB>value" per validation of SET
  awk -F'\t' -v d="$2" -v c="$3" -v q="${QUARTER:-0}" '$5 == d {
    if (q > 0) printf "%.2f\t%s (step %s)\n", int($3 / (q * 3600)) * q, $c, $1; else print $1 "\t" $c }' "$1"
}
KEY=step
if [ -n "$HOURS" ]; then
  KEY=CPU-h
  echo "arms of $HOURS CPU-hours each on $(cpu_here), precision" \
    "$(precision "$ARM"); code $(sed -n 's/^commit //p' "$ARM/probe.record" 2>/dev/null); starting files: base" \
    "$(hash16 "$PACK"), lever $(sed -n 's/^start //p' "$ARM/probe.record" 2>/dev/null)"
fi
[ -z "${BASE_CURVE:-}" ] || echo "base arm not trained in this run: its rows are $BASE_CURVE's"
if [ "${MODEL:-zh}" == en ]; then
  acc() { join -t $'\t' <(rows "$1" "$2" 7 | sed 's/ (step [0-9]*)//' | sort) \
            <(rows "$1" "$2@alnum-insensitive" 7 | sort) \
            | awk -F'\t' '{n = index($3, " "); printf "%s\t%.2f / %.2f %%%s\n", $1, 100 * $2, 100 * $3,
                                            n ? substr($3, n) : ""}'; }
  for set in ${DEV//,/ }; do
    case $set in
      data/en_dev) echo "real development set (data/en_dev, 1,257 crops): word accuracy at each validation, exact /" \
        "36-class" ;;
      *) echo "ICDAR 2015 development block ($set, 468 crops): word accuracy at each validation, exact / 36-class" ;;
    esac
    printf "%s\tbase\t%s (%s)\n" "$KEY" "$NAME" "$*"
    join -t $'\t' <(acc "$BASE_ROWS" "$set") <(acc "$ARM/curve.tsv" "$set") | sort -n
  done
  exit 0
fi
echo "development faces (print damage, 1,200 lines): CER at each validation"
printf "%s\tbase\t%s (%s)\n" "$KEY" "$NAME" "$*"
join -t $'\t' <(rows "$BASE_ROWS" "$DEV" 6 | sort) <(rows "$ARM/curve.tsv" "$DEV" 6 | sort) | sort -n
if [ -n "$EXTRA" ]; then
  echo "$EXTRA (1,200 lines; the lever arm only): CER at each validation"
  printf "%s\t%s\n" "$KEY" "$NAME"
  rows "$ARM/curve.tsv" "$SECOND" 6 | sort -n
fi
