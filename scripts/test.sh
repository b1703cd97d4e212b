#!/usr/bin/env bash
# The README's test command: set up (idempotent) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# pytest exits 5 when it collects no tests: that is a broken suite, and the non-zero code is passed on as it is.
exec "$ROOT/.venv/bin/python" -m pytest tests "$@"
