#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: system fonts and word list, .venv, the package.
# Idempotent: a second run only checks stamps and returns in about a second.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"

# System packages: the fonts the synthetic generator was tuned with (crnn/data/font_packages.txt: Latin faces and
# four CJK fonts for Chinese text lines), a word list, and tesseract for side-by-side comparisons.
APT_PKGS="$(grep -v '^#' crnn/data/font_packages.txt | tr '\n' ' ') wamerican tesseract-ocr tesseract-ocr-eng"
missing=""
installed="$(dpkg-query -W -f='${Package} ${Status}\n' $APT_PKGS 2>/dev/null | awk '/ installed$/ {print $1}' || true)"
for p in $APT_PKGS; do
  case " $(echo $installed) " in *" $p "*) ;; *) missing="$missing $p" ;; esac
done
if [ -n "$missing" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing system packages:$missing"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "[setup] warning: missing system packages:$missing (install them as root for the full synthetic-data fonts)"
  fi
fi

# Headless Chromium for the test that opens an evaluation report (crnn-eval --report) the way a person would.
# Optional: without it that one test is skipped with its reason, so a failed install only warns.
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "[setup] installing chromium (headless browser for the report test)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
      >/dev/null 2>&1 || echo "[setup] warning: could not install chromium; the report browser test will be skipped"
  else
    echo "[setup] warning: chromium is missing (apt-get install chromium as root); the report browser test will be skipped"
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
  LOG="$VENV/pip-install.log"
  { "$VENV/bin/python" -m pip install --upgrade pip setuptools wheel &&
    "$VENV/bin/python" -m pip install -e ".[dev,serve,docs]"; } > "$LOG" 2>&1 ||
    { tail -n 40 "$LOG"; echo "[setup] error: pip install failed (full log: $LOG)"; exit 1; }
  echo "$WANT" > "$STAMP"
fi
