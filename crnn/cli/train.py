"""crnn-train: train a CRNN (single device, DataParallel, or DDP when started by torchrun)."""
from __future__ import annotations

import argparse
import os
import sys

EPILOG = """examples:
  crnn-train --config configs/synth_cpu.yaml
  crnn-train --config configs/smoke.yaml train.steps=50 data.batch_size=16
  crnn-train --config configs/crnn_paper.yaml train.parallel=dp train.device_ids=[0,1]
  torchrun --standalone --nproc_per_node=2 -m crnn.cli.train --config configs/synth_cpu.yaml
  (or scripts/train_ddp.sh --nproc 2 --config configs/synth_cpu.yaml)

Overrides are section.key=value (sections: model, data, train); values are YAML
(numbers, true/false, [lists]). Unknown keys and wrong types are errors.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crnn-train", description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="YAML recipe (see configs/); defaults apply where it is silent")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None,
                   help="accepted for the legacy torch.distributed.launch; torchrun's LOCAL_RANK is used")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    p.add_argument("overrides", nargs="*", metavar="section.key=value", help="config overrides")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-train."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except KeyboardInterrupt:  # also while torch and the config load (Ctrl-C in the first seconds of a torchrun job)
        print(f"crnn-train: {_rank_prefix()}interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    """Load the config and train; errors become one line and an exit code (1 or 2)."""
    from crnn.config import ConfigError, dump_config, load_config

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"crnn-train: error: {_one_line(e)}", file=sys.stderr)
        return 2
    if args.print_config:
        print(dump_config(cfg), end="")
        return 0
    from crnn.engine.trainer import TrainingError, fit

    try:
        summary = fit(cfg)
    except (TrainingError, ValueError, OSError) as e:
        msg = _one_line(e)
        print(f"crnn-train: error: {'' if msg.startswith('rank ') else _rank_prefix()}{msg}", file=sys.stderr)
        return 1
    if summary.get("interrupted"):
        return 128 + int(summary.get("signal") or 2)  # 130 after SIGINT, 143 after SIGTERM (shell convention)
    return 0


def _one_line(e: BaseException) -> str:
    """The error's message on one line (YAML and OS errors can span several)."""
    return " ".join(str(e).split()) or type(e).__name__


def _rank_prefix() -> str:
    """"rank R of N: " under torchrun with several processes, else "" (so each rank's message says who it is)."""
    world = os.environ.get("WORLD_SIZE", "1")
    return f"rank {os.environ.get('RANK', '?')} of {world}: " if world.isdigit() and int(world) > 1 else ""


if __name__ == "__main__":
    sys.exit(main())
