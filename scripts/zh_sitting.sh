#!/usr/bin/env bash
# One sitting of the Chinese line model's training (configs/shipped_zh.yaml), a run that spans many sittings and
# machines. Each sitting continues where the last one stopped and ends by writing what the next one needs:
#   bash scripts/zh_sitting.sh start [key=value ...]  # set up, then train in the background (runs/zh/train.log)
#   bash scripts/zh_sitting.sh status                 # is it running; its last log lines and learning-curve rows
#   bash scripts/zh_sitting.sh stop                   # stop cleanly (it saves last.pt), then write the sitting pack
#   bash scripts/zh_sitting.sh pack                   # only write the pack from runs/zh/last.pt
#   bash scripts/zh_sitting.sh report                 # after stop: the model card's figures for the pack (below)
# start: continues runs/zh/last.pt when this machine has it, else the committed sitting pack
# weights/crnn_zh_lines.pt (fp16 weights, step, lines seen, CPU-seconds; the optimizer starts afresh), else starts from
# the recipe's train.init_weights (the 48 px run's start, weights/candidates/zh_h48_start.pt). Two DDP processes x 1
# thread (NPROC to change). stop/pack: weights/crnn_zh_lines.pt (the shipped model and the next sitting's start) and
# weights/crnn_zh_lines_curve.tsv (held-out CER against lines seen and CPU-seconds, with the CPU of every row): commit
# both. report (not while training: it measures lines/s): the pack
# beside PP-OCRv4 and PP-OCRv6 small on 2,000 lines per set (runs/zh/bench.json and bench.md;
# data/zh_bench_2000/readings.tsv), crnn-eval on the held-out set, the learning curve's picture and the sets' contact
# sheet (weights/crnn_zh_lines_curve.png, weights/crnn_zh_lines_sheet.png), and issue 43's faces held out by design
# (1,200 lines per set: runs/zh/faces.json and faces.md)
# (scripts/sitting.sh zh does the work; this name stays for the commands in the docs)
case "${1:-}" in
  start|status|stop|pack|report) exec bash "$(dirname "${BASH_SOURCE[0]}")/sitting.sh" zh "$@" ;;
  *) sed -n '2,/^case /{/^#/s/^# \{0,1\}//p}' "$0"; exit 2 ;;
esac
