#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) into site/, strictly: a broken link or anchor, or a page left out of
# the navigation, fails the build. --serve previews it on http://127.0.0.1:8000 instead. Extra arguments go to mkdocs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# Quiet what third parties print on every build: the Material theme's end-of-life banner (its own switch) and jieba's
# dictionary lines (the search index splits Chinese words with it; it logs at DEBUG on a handler of its own).
export NO_MKDOCS_2_WARNING=1
MKDOCS='import logging, sys
try:
    import jieba
    jieba.setLogLevel(logging.WARNING)
except ImportError:
    pass
from mkdocs.__main__ import cli
sys.argv[0] = "mkdocs"
cli()'
if [ "${1:-}" = "--serve" ]; then
  shift
  exec "$ROOT/.venv/bin/python" -c "$MKDOCS" serve --strict "$@"
fi
exec "$ROOT/.venv/bin/python" -c "$MKDOCS" build --strict "$@"
