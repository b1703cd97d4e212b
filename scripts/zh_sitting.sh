#!/usr/bin/env bash
# One sitting of the Chinese line model's training (configs/shipped_zh.yaml), a run that spans many sittings and
# machines. Each sitting continues where the last one stopped and ends by writing what the next one needs:
#   bash scripts/zh_sitting.sh start [key=value ...]  # set up, then train in the background (runs/zh/train.log)
#   bash scripts/zh_sitting.sh status                 # is it running; its last log lines and learning-curve rows
#   bash scripts/zh_sitting.sh stop                   # stop cleanly (it saves last.pt), then write the sitting pack
#   bash scripts/zh_sitting.sh pack                   # only write the pack from runs/zh/last.pt
#   bash scripts/zh_sitting.sh report                 # after stop: the model card's figures for the pack (below)
# start: continues runs/zh/last.pt when this machine has it, else the committed sitting pack
# weights/crnn_zh_lines.pt (fp16 weights, step, lines seen, CPU-seconds; the optimizer starts afresh), else starts from
# the English model. Two DDP processes x 1 thread (NPROC to change). stop/pack: weights/crnn_zh_lines.pt (the shipped
# model and the next sitting's start) and weights/crnn_zh_lines_curve.tsv (held-out CER against lines seen and
# CPU-seconds, with the CPU of every row): commit both. report (not while training: it measures lines/s): the pack
# beside PP-OCRv4 and PP-OCRv6 small on 2,000 lines per set (runs/zh/bench.json and bench.md;
# data/zh_bench_2000/readings.tsv), crnn-eval on the held-out set, the learning curve's picture and the sets' contact
# sheet (weights/crnn_zh_lines_curve.png, weights/crnn_zh_lines_sheet.png), and issue 43's faces held out by design
# (1,200 lines per set: runs/zh/faces.json and faces.md)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CONFIG=configs/shipped_zh.yaml
OUT=runs/zh
PACK=weights/crnn_zh_lines.pt
CURVE=weights/crnn_zh_lines_curve.tsv
PIDFILE=$OUT/train.pid
PY=.venv/bin/python

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

pack() {
  [ -f "$OUT/last.pt" ] || { echo "zh_sitting: no $OUT/last.pt to pack" >&2; exit 1; }
  # the pack is read as the recipe says (data.read_width_scale), whatever the run that wrote last.pt was started with
  local scale
  scale=$("$PY" -c "from crnn.config import load_config; print(load_config('$CONFIG').data.read_width_scale)")
  "$PY" -m crnn.cli.convert_ckpt "$OUT/last.pt" "$PACK" --pack --force --read-width-scale "$scale"
  [ -f "$OUT/curve.tsv" ] && cp "$OUT/curve.tsv" "$CURVE" && echo "wrote $CURVE ($(($(wc -l < "$CURVE") - 1)) rows)"
  echo "commit them: git add $PACK $CURVE && git commit -m 'Chinese line model: sitting at step ...'"
}

case "${1:-}" in
  start)
    shift
    running && { echo "zh_sitting: already running (pid $(cat "$PIDFILE")); see $OUT/train.log" >&2; exit 1; }
    bash scripts/setup.sh
    "$PY" scripts/face_manifest.py --fetch  # the npm faces (training and yardstick) into the font cache, once
    "$PY" scripts/zh_benchmark.py --build-only --sets heldout,unseen_clean,unseen_print,dev_print --num 500
    mkdir -p "$OUT"
    if [ ! -f "$OUT/last.pt" ] && [ -f "$PACK" ]; then
      echo "zh_sitting: continuing from the sitting pack $PACK"
      cp "$PACK" "$OUT/last.pt"  # train.resume=auto (torchrun's default) takes it, and so does a restarted group
      [ -f "$OUT/curve.tsv" ] || { [ -f "$CURVE" ] && cp "$CURVE" "$OUT/curve.tsv"; } || true
    fi
    nohup setsid scripts/train_ddp.sh --nproc "${NPROC:-2}" --config "$CONFIG" "$@" >> "$OUT/train.log" 2>&1 &
    echo $! > "$PIDFILE"
    echo "zh_sitting: training in the background (pid $(cat "$PIDFILE")); log: $OUT/train.log"
    ;;
  status)
    running && echo "running (pid $(cat "$PIDFILE"))" || echo "not running"
    tail -n 5 "$OUT/train.log" 2>/dev/null || true
    [ -f "$OUT/curve.tsv" ] && { head -1 "$OUT/curve.tsv" | cut -f1-7; tail -n 4 "$OUT/curve.tsv" | cut -f1-7; } || true
    ;;
  stop)
    if running; then
      pid=$(cat "$PIDFILE")
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
      for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      kill -0 "$pid" 2>/dev/null && { echo "zh_sitting: still running after 120 s; see $OUT/train.log" >&2; exit 1; }
      echo "zh_sitting: stopped"
    fi
    pack
    ;;
  pack) pack ;;
  report)
    running && { echo "zh_sitting: training is running; stop it first (the benchmark measures lines/s)" >&2; exit 1; }
    scale=$("$PY" -c "from crnn.config import load_config; print(load_config('$CONFIG').data.read_width_scale)")
    "$PY" scripts/zh_benchmark.py --weights zh --width-scale "$scale" --width-scale 1 --num 2000 \
      --work data/zh_bench_2000 --json --markdown "$OUT/bench.md" > "$OUT/bench.json"
    { echo; echo "CER by held-out face:"; "$PY" scripts/zh_benchmark.py --work data/zh_bench_2000 --by-font; } \
      >> "$OUT/bench.md"
    .venv/bin/crnn-eval --weights zh --data data/zh_bench_2000/heldout --protocol unicode | grep -A 2 "^dataset"
    "$PY" scripts/plot_curve.py "$CURVE@heldout=shipped_zh" "$CURVE@unseen_clean=shipped_zh, unseen fonts clean" \
      "$CURVE@unseen_print=shipped_zh, unseen fonts print damage" \
      "$CURVE@dev_print=shipped_zh, faces held out by design (dev), print damage" \
      benchmarks/zh_curves/baseline_w4.tsv=zh_baseline_w4 \
      --target 0.01 --out weights/crnn_zh_lines_curve.png
    cp data/zh_bench_2000/contact_sheet.png weights/crnn_zh_lines_sheet.png
    cat "$OUT/bench.md"
    # issue 43's honest yardstick: the faces held out by design (development and final), per face, beside the peers
    "$PY" scripts/zh_benchmark.py --weights zh --sets dev_print,final_print --num 1200 --work data/zh_faces \
      --json --markdown "$OUT/faces.md" > "$OUT/faces.json"
    cat "$OUT/faces.md"
    echo "zh_sitting: figures in $OUT/bench.md and $OUT/faces.md; put them in docs/chinese.md (counters, headline CER," \
      "the curve's last row) and weights/README.md (tables, history); commit with the pack"
    ;;
  *) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
esac
