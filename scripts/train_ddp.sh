#!/usr/bin/env bash
# DistributedDataParallel training through torchrun.
#   scripts/train_ddp.sh [--nproc N] [--max-restarts R] --config configs/X.yaml [section.key=value ...]
# N defaults to the number of visible GPUs (2 on a CPU-only machine). Multi-node: set NNODES, NODE_RANK,
# MASTER_ADDR and MASTER_PORT on every machine (see README, "Several machines").
# A failed worker restarts the whole group up to R times (default 3, env MAX_RESTARTS); the restarted group resumes
# from the output folder's last.pt (train.resume=auto is the default under torchrun).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
NPROC=""
MAX_RESTARTS="${MAX_RESTARTS:-3}"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) NPROC="$2"; shift 2 ;;
    --nproc=*) NPROC="${1#*=}"; shift ;;
    --max-restarts) MAX_RESTARTS="$2"; shift 2 ;;
    --max-restarts=*) MAX_RESTARTS="${1#*=}"; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if [ -z "$NPROC" ]; then
  NPROC="$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)"
  [ "$NPROC" -gt 0 ] 2>/dev/null || NPROC=2
fi
NNODES="${NNODES:-1}"
if [ "$NNODES" -gt 1 ]; then
  : "${MASTER_ADDR:?set MASTER_ADDR to the address of the machine with NODE_RANK=0}"
  RDZV=(--nnodes="$NNODES" --node_rank="${NODE_RANK:?set NODE_RANK (0..NNODES-1)}"
        --master_addr="$MASTER_ADDR" --master_port="${MASTER_PORT:-29500}")
else
  RDZV=(--standalone --nnodes=1)
fi
# torchrun itself, except that a Ctrl-C / SIGTERM ends with one line and exit code 128+signal (130, 143) instead of
# torchrun's traceback and exit code 1: the agent forwards the signal, each worker finishes its step, rank 0 saves
# last.pt, and running the same command again resumes (train.resume=auto).
LAUNCH='import sys
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.run import main
try:
    main()
except SignalException as e:
    print(f"train_ddp.sh: stopped by {e.sigval.name}; run the same command again to resume from last.pt",
          file=sys.stderr)
    sys.exit(128 + int(e.sigval))'
exec "$PY" -c "$LAUNCH" "${RDZV[@]}" --nproc_per_node="$NPROC" --max-restarts="$MAX_RESTARTS" \
  -m crnn.cli.train "${ARGS[@]}"
