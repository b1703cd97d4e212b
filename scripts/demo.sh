#!/usr/bin/env bash
# The README's main job: set up, make synthetic data, train briefly, then read images with crnn-predict.
#   1. crnn-train on configs/smoke.yaml: generates a small synthetic LMDB on the first run, trains for a few steps
#      (a 20-step model cannot read yet: this shows the training path end to end)
#   2. crnn-predict with that fresh checkpoint
#   3. crnn-predict with the shipped model (weights/) on a few real word crops, and crnn-eval on the SVT crops
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
export PATH="$ROOT/.venv/bin:$PATH"
SHARED="$ROOT/../shared/data"

echo "== 1. train: configs/smoke.yaml (synthetic data generated into data/smoke/ on the first run) =="
crnn-train --config configs/smoke.yaml train.resume=none

IMAGES=(weights/samples/*.png)
if [ -d "$SHARED/svt_train/IMG" ]; then
  IMAGES=("$SHARED"/svt_train/IMG/{1,2,3,4,5,6}.jpg "$SHARED"/iiit5k_train/IMG/{1,2,3,4,5,6}.jpg)
fi

echo "== 2. predict with the 20-step smoke model (runs/smoke/last.pt) =="
crnn-predict --weights runs/smoke/last.pt "${IMAGES[@]:0:3}"

echo "== 3. predict with the shipped model (default weights in weights/) =="
crnn-predict "${IMAGES[@]}"
if [ -d "$SHARED/svt_train" ]; then
  echo "== 4. evaluate the shipped model on the SVT training crops (alnum-insensitive protocol) =="
  crnn-eval --data "$SHARED/svt_train" --protocol alnum-insensitive --worst 5
fi
