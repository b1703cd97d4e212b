#!/usr/bin/env bash
# A fine-tune recipe run with two seeds side by side, their average (a uniform model soup), and that average
# interpolated with the starting model - the CNN nearer the start than the rest (docs/finetune.md):
#   bash scripts/finetune_soup.sh OUT [crnn-train overrides ...]     # configs/finetune.yaml: from crnn_en
#   bash scripts/finetune_soup.sh runs/codes model.charset=ALPHABET data.train=crops/ data.val=val/
#   CONFIG=configs/finetune_alnum36.yaml bash scripts/finetune_soup.sh runs/codes model.charset=ALPHABET \
#       data.train=crops/ data.val=val/ train.init_weights=weights/crnn_vgg_small.pt   # as measured for forgetting
# OUT/seed0/, OUT/seed1/: the two runs (logs OUT/seed0.log, ...); OUT/soup.pt: the model to read. Each run uses one
# thread (the recipe's train.threads): a 2-core machine runs the pair side by side. Environment:
# SEEDS (default "0 1"), CNN_ALPHA (the CNN's share of the fine-tuned weights, default 0.65, chosen from the alnum36
# start; the rest takes the recipe's train.interpolate_base, 0.8), CONFIG (the recipe, default configs/finetune.yaml;
# the soups of docs/finetune-measured.md: configs/finetune_alnum36.yaml), CRNN_BIN (folder of the crnn-* commands,
# default: .venv/bin when present). Run the same command again after a stop: every run resumes its last.pt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n 2,13p "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] && [ "${1#-}" = "$1" ] || usage
OUT=$1; shift
SEEDS=${SEEDS:-0 1}
CNN_ALPHA=${CNN_ALPHA:-0.65}
CONFIG=${CONFIG:-$ROOT/configs/finetune.yaml}
BIN=${CRNN_BIN:-$([ -x "$ROOT/.venv/bin/crnn-train" ] && echo "$ROOT/.venv/bin" || dirname "$(command -v crnn-train)")}
PY="$BIN/python"; [ -x "$PY" ] || PY=python3
read -ra seeds <<< "$SEEDS"
[ "${#seeds[@]}" -ge 2 ] || { echo "finetune_soup: SEEDS needs two seeds or more, got '$SEEDS'" >&2; exit 2; }

# what the recipe resolves to with these overrides: the start, its share, and the synthetic sets made on first use
# (made by the first run alone; the others start once they exist as this recipe renders them, so that they are not
# rendered twice)
plan=$("$PY" - "$CONFIG" "$@" <<'EOF'
import sys
from crnn.config import ConfigError, load_config
try:
    cfg = load_config(sys.argv[1], sys.argv[2:])
except (ConfigError, ValueError) as e:
    sys.exit(f"finetune_soup: {e}")
if not cfg.train.init_weights:
    sys.exit("finetune_soup: a soup interpolates toward the starting model: give train.init_weights=START")
print(cfg.train.init_weights, cfg.train.interpolate_base)
EOF
)
read -r START ALPHA <<< "$plan"
missing() { "$PY" -c 'import sys
from crnn.config import load_config
from crnn.data.rehearsal import needs_start_config, synth_jobs
from crnn.engine.finetune import start_config
cfg = load_config(sys.argv[1], sys.argv[2:])
print(len(synth_jobs(cfg, start_config(cfg) if needs_start_config(cfg) else None)))' "$CONFIG" "$@"; }
mkdir -p "$OUT"

pids=()
stop() { echo "finetune_soup: stopping the runs (each saves its last.pt; run the same command again to resume)" >&2
         for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait; exit 130; }
trap stop INT TERM
start() {  # seed
  "$BIN/crnn-train" --config "$CONFIG" "${overrides[@]}" "train.seed=$1" "train.output_dir=$OUT/seed$1" \
    train.resume=auto > "$OUT/seed$1.log" 2>&1 &
  pids+=($!)
  echo "finetune_soup: seed $1 training in the background (pid $!), log $OUT/seed$1.log"
}
overrides=("$@")
set --
start "${seeds[0]}"
while [ "$(missing "${overrides[@]}")" != 0 ] && kill -0 "${pids[0]}" 2>/dev/null; do sleep 5; done
if ! kill -0 "${pids[0]}" 2>/dev/null && ! wait "${pids[0]}"; then  # it failed before the others started: stop here
  echo "finetune_soup: seed ${seeds[0]} failed; see $OUT/seed${seeds[0]}.log:" >&2
  tail -n 3 "$OUT/seed${seeds[0]}.log" >&2
  exit 1
fi
for s in "${seeds[@]:1}"; do start "$s"; done

# progress: the last step line of every run, once a minute
alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while alive; do
  for _ in $(seq 60); do sleep 1; alive || break; done
  line=""
  for s in "${seeds[@]}"; do
    step=$(grep -o 'step [0-9]*/[0-9]*' "$OUT/seed$s.log" 2>/dev/null | tail -n 1 || true)
    line+="seed $s: ${step:-starting}; "
  done
  echo "finetune_soup: ${line%; }"
done
failed=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" 2>/dev/null || [ $? = 127 ] || { echo "finetune_soup: seed ${seeds[$i]} failed; see $OUT/seed${seeds[$i]}.log:" >&2
                          tail -n 3 "$OUT/seed${seeds[$i]}.log" >&2; failed=1; }
done
[ $failed = 0 ] || exit 1
trap - INT TERM

others=()
for s in "${seeds[@]:1}"; do others+=(--soup "$OUT/seed$s/last.pt"); done
"$BIN/crnn-convert-ckpt" "$OUT/seed${seeds[0]}/last.pt" "$OUT/soup.pt" "${others[@]}" \
  --interpolate "$START" --alpha "$ALPHA" --cnn-alpha "$CNN_ALPHA" --force
echo "finetune_soup: the model to read is $OUT/soup.pt (crnn-eval --weights $OUT/soup.pt --data ...)"
