#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml, docs/) into site/, strictly: a broken link or anchor, or a page left out of
# the navigation, fails the build. --serve previews it on http://127.0.0.1:8000 instead. Extra arguments go to mkdocs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
if [ "${1:-}" = "--serve" ]; then
  shift
  exec "$ROOT/.venv/bin/python" -m mkdocs serve --strict "$@"
fi
exec "$ROOT/.venv/bin/python" -m mkdocs build --strict "$@"
