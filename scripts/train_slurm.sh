#!/usr/bin/env bash
# SLURM: one torchrun agent per machine (c10d rendezvous), N workers each; pre-emption saves last.pt and requeues.
#   sbatch [--nodes=2] scripts/train_slurm.sh --config configs/X.yaml [section.key=value ...]
# train.output_dir should be on storage every machine can read (it need not be: rank 0 sends the newest last.pt to
# the others). Env: NPROC (workers per machine; default: GPUs visible), MAX_RESTARTS (3), JOIN_TIMEOUT (300 s),
# MASTER_PORT (default derived from the job id). Without torchrun, `srun crnn-train ...` with one task per GPU works too
# (SLURM_PROCID/NTASKS/LOCALID/NODELIST give rank, world size, local rank and the master address).
#SBATCH --job-name=crnn
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --time=24:00:00
#SBATCH --signal=B:USR1@180
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=crnn-%j.out
set -uo pipefail
ROOT="${SLURM_SUBMIT_DIR:-$(pwd)}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
NPROC="${NPROC:-$(nvidia-smi -L 2>/dev/null | wc -l)}"
[ "$NPROC" -gt 0 ] 2>/dev/null || NPROC=1
MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
MASTER_PORT="${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}"
export CRNN_LAUNCH_PROG=train_slurm.sh
cd "$ROOT"
srun --kill-on-bad-exit=1 "$PY" -m crnn.cli.launch --join-timeout "${JOIN_TIMEOUT:-300}" \
  --nnodes="$SLURM_JOB_NUM_NODES" --nproc_per_node="$NPROC" --max-restarts="${MAX_RESTARTS:-3}" \
  --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$SLURM_JOB_ID" \
  -m crnn.cli.train "$@" &
SRUN=$!
# --signal=B:USR1@180: 3 minutes before the time limit or on pre-emption SLURM signals this script; srun forwards
# SIGTERM to the agents, which forward it to the workers: each finishes its step, rank 0 saves last.pt. The requeued
# job runs this script again and resumes from last.pt (train.resume=auto under torchrun).
requeue() {
  echo "train_slurm.sh: pre-emption warning: saving last.pt and requeueing job $SLURM_JOB_ID" >&2
  kill -TERM "$SRUN" 2>/dev/null
  wait "$SRUN"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
}
trap requeue USR1
wait "$SRUN"  # a USR1 interrupts this wait and runs requeue(), which exits
exit $?
