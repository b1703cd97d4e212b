"""crnn-train: train a CRNN (single device, DataParallel, or DDP when started by torchrun)."""
from __future__ import annotations

import argparse
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
    from crnn.config import ConfigError, dump_config, load_config

    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"crnn-train: error: {e}", file=sys.stderr)
        return 2
    if args.print_config:
        print(dump_config(cfg), end="")
        return 0
    from crnn.engine.trainer import fit

    try:
        summary = fit(cfg)
    except KeyboardInterrupt:
        print("crnn-train: interrupted", file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OSError) as e:
        from crnn.engine.trainer import TrainingError

        known = isinstance(e, (TrainingError, ValueError, OSError))
        if not known:
            raise
        print(f"crnn-train: error: {e}", file=sys.stderr)
        return 1
    return 130 if summary.get("interrupted") else 0


if __name__ == "__main__":
    sys.exit(main())
