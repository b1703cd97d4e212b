#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: system fonts and word list, .venv, the package.
# Idempotent: a second run only checks stamps and returns in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"

# System packages: fonts for the synthetic generator, a word list, tesseract for side-by-side comparisons.
APT_PKGS="fonts-dejavu-core fonts-liberation2 fonts-freefont-ttf fonts-roboto-unhinted fonts-open-sans fonts-lato \
fonts-croscore fonts-texgyre fonts-urw-base35 wamerican tesseract-ocr tesseract-ocr-eng"
missing=""
for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing system packages:$missing"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "[setup] warning: missing system packages:$missing (install them as root for more synthetic-data fonts)"
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating $VENV"
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.crnn-installed"
WANT="$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[setup] installing crnn and its dependencies into .venv (first time: a few minutes for torch)"
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
  "$VENV/bin/python" -m pip install -q -e ".[dev]"
  echo "$WANT" > "$STAMP"
fi
