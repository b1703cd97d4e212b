"""crnn-launch: torchrun for crnn-train with a bounded join time and one-line failures (used by scripts/*.sh).

    python -m crnn.cli.launch [--join-timeout S] [torchrun options] -m crnn.cli.train [train arguments]

Everything but --join-timeout goes to torchrun unchanged. While the agent waits for the other machines it prints a
line; after S seconds (default 300) it gives up with one line naming the machine(s) that did not (re)join; Ctrl-C
while waiting stops at once (exit 130).
"""
from __future__ import annotations

import os
import sys

DEFAULT_JOIN_TIMEOUT_S = 300


def main(argv: list[str] | None = None) -> int:
    """Entry point: split off --join-timeout, run torchrun."""
    args = list(sys.argv[1:] if argv is None else argv)
    join = DEFAULT_JOIN_TIMEOUT_S
    for i, a in enumerate(args):
        if a == "--":
            break
        if a.startswith("--join-timeout"):
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            del args[i:i + (1 if "=" in a else 2)]
            if not value.isdigit() or int(value) < 1:
                print(f"crnn-launch: error: --join-timeout needs a number of seconds >= 1, got {value!r}",
                      file=sys.stderr)
                return 2
            join = int(value)
            break
    prog = os.environ.get("CRNN_LAUNCH_PROG", "crnn-launch")  # the script that called us names itself
    say = lambda line: print(f"{prog}: {line}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        from crnn.engine.distributed import run_torchrun  # imports torch: a second or two
    except KeyboardInterrupt:  # Ctrl-C before any worker started: nothing to save
        say("interrupted before training started")
        return 130
    return run_torchrun(args, join, say)


if __name__ == "__main__":
    sys.exit(main())
