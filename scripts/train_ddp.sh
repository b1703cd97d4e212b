#!/usr/bin/env bash
# DistributedDataParallel training through torchrun (c10d rendezvous).
#   scripts/train_ddp.sh [--nproc N] [--max-restarts R] [--join-timeout S] --config configs/X.yaml [section.key=value ...]
# N defaults to the number of visible GPUs (2 on a CPU-only machine). Several machines: set NNODES and MASTER_ADDR
# (any one machine's address, the same on all; MASTER_PORT defaults to 29500, RDZV_ID names the job) and run the same
# command on every machine (docs/clusters.md). A failed worker restarts the whole group up to R times (default 3,
# env MAX_RESTARTS); the restarted group resumes from the newest last.pt (train.resume=auto under torchrun). A group
# that cannot (re-)form gives up after S seconds (default 300, env JOIN_TIMEOUT), naming the missing machine(s).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
NPROC=""
MAX_RESTARTS="${MAX_RESTARTS:-3}"
JOIN_TIMEOUT="${JOIN_TIMEOUT:-300}"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) NPROC="$2"; shift 2 ;;
    --nproc=*) NPROC="${1#*=}"; shift ;;
    --max-restarts) MAX_RESTARTS="$2"; shift 2 ;;
    --max-restarts=*) MAX_RESTARTS="${1#*=}"; shift ;;
    --join-timeout) JOIN_TIMEOUT="$2"; shift 2 ;;
    --join-timeout=*) JOIN_TIMEOUT="${1#*=}"; shift ;;
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
  : "${MASTER_ADDR:?set MASTER_ADDR to the address of one of the machines (the same on every machine)}"
  RDZV=(--nnodes="$NNODES" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:${MASTER_PORT:-29500}"
        --rdzv-id="${RDZV_ID:-crnn}")
else
  RDZV=(--standalone --nnodes=1)
fi
# torchrun, except that a missing machine, a lost rendezvous, Ctrl-C or SIGTERM each end with one line (and exit code
# 1, 130 or 143) instead of tracebacks: on a signal the agent forwards it, each worker finishes its step, rank 0 saves
# last.pt, and running the same command again resumes (train.resume=auto).
export CRNN_LAUNCH_PROG=train_ddp.sh
exec "$PY" -m crnn.cli.launch --join-timeout "$JOIN_TIMEOUT" "${RDZV[@]}" --nproc_per_node="$NPROC" \
  --max-restarts="$MAX_RESTARTS" -m crnn.cli.train "${ARGS[@]}"
