#!/usr/bin/env bash
# The README's main job: set up, train a model that reads, score it on images it never saw, then read images.
#   1. crnn-synth renders numbers (digit strings, prices, times, phone numbers, dates) into data/demo/ (first run only)
#   2. crnn-train teaches the shipped network a new alphabet, digits only (a fresh output layer, which reads 0 % before
#      training), on those images: configs/demo.yaml, a few minutes on 2 CPU cores. A second run finds the finished
#      run in runs/demo/ and reuses it; pass --retrain to train again.
#   3. crnn-eval scores it on 200 held-out images -> "demo: the model trained here reads N of M held-out images (P%)"
#   4. crnn-predict with that model on a few held-out images, next to their truth
#   5. crnn-predict with the shipped model (weights/) on real word crops when the shared data folder has them
#      ($CRNN_SHARED_DATA, else ../shared/data), else on weights/samples/; crnn-eval on the SVT crops when present
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH"
RETRAIN=0
for arg in "$@"; do
  case "$arg" in
    --retrain) RETRAIN=1 ;;
    *) echo "demo.sh: unknown argument '$arg' (the only option is --retrain)" >&2; exit 2 ;;
  esac
done
DATA=data/demo
RUN=runs/demo
START=$SECONDS

echo "== 1. data: numbers rendered by crnn-synth into $DATA/ (first run only) =="
synth() {  # synth NAME SEED NUM: one LMDB of the demo task, kept when it is already there
  if [ -d "$DATA/$1.lmdb" ]; then
    echo "$DATA/$1.lmdb: already there"
  else
    crnn-synth --charset digits --max-len 10 --seed "$2" --num "$3" --out "$DATA/$1.lmdb" --quiet
  fi
}
synth train 1 10000
synth val 3 100
synth heldout 2 200

echo "== 2. train: the shipped network with a new output layer for the digits alphabet, configs/demo.yaml =="
[ -f "$DATA/init.pt" ] ||
  python scripts/demo_heldout.py init weights/crnn_vgg_small.pt --charset digits --out "$DATA/init.pt"
mkdir -p "$RUN"
crnn-eval --weights "$DATA/init.pt" --data "$DATA/heldout.lmdb" --protocol exact --worst 0 --json > "$RUN/init_eval.json"
python scripts/demo_heldout.py report "$RUN/init_eval.json" --before
T0=$SECONDS
if [ "$RETRAIN" = 1 ]; then
  crnn-train --config configs/demo.yaml train.resume=none
else
  crnn-train --config configs/demo.yaml train.resume=auto   # a finished run in $RUN/ is reused as it is
fi
echo "training took $((SECONDS - T0)) s"

echo "== 3. score it on the $DATA/heldout.lmdb images (a seed it never trained on): crnn-eval =="
crnn-eval --weights "$RUN/last.pt" --data "$DATA/heldout.lmdb" --protocol exact --worst 3 --json \
  > "$RUN/heldout_eval.json"
python scripts/demo_heldout.py report "$RUN/heldout_eval.json"

echo "== 4. crnn-predict with the model trained here, on six held-out images =="
python scripts/demo_heldout.py export "$DATA/heldout.lmdb" "$DATA/heldout_png" --num 6 >/dev/null
crnn-predict --weights "$RUN/last.pt" --format json "$DATA"/heldout_png/*.png |
  python scripts/demo_heldout.py compare "$DATA/heldout_png"
echo "(confidence is the probability the model gives the whole reading, summed over every way of placing its" \
     "letters on the time steps; a model trained for minutes is often right but not yet sure, so its correct" \
     "readings show lower figures than the shipped models, which give 0.9 and more on clean crops)"

SVT="$(python -m crnn.shared_data svt_train || true)"
IIIT="$(python -m crnn.shared_data iiit5k_train || true)"
if [ -n "$SVT" ] && [ -n "$IIIT" ]; then
  echo "== 5. crnn-predict with the shipped model (weights/) on real word crops from $(dirname "$SVT") =="
  crnn-predict "$SVT"/IMG/{1,2,3,4,5,6}.jpg "$IIIT"/IMG/{1,2,3,4,5,6}.jpg
  echo "== 6. crnn-eval: the shipped model on the SVT training crops (alnum-insensitive protocol) =="
  crnn-eval --data "$SVT" --protocol alnum-insensitive --worst 5
else
  echo "== 5. crnn-predict with the shipped model (weights/) on weights/samples/ (no real crops in" \
       "$(python -m crnn.shared_data); set CRNN_SHARED_DATA to a folder with svt_train/ and iiit5k_train/) =="
  crnn-predict weights/samples/synth_*.png
fi
echo "demo finished in $((SECONDS - START)) s (after set-up)"
echo "next: the commands are in .venv; in your shell run 'source .venv/bin/activate' first, then for example" \
     "'crnn-predict weights/samples/synth_2.png' (more: README.md, docs/getting-started.md)"
