"""crnn-export: write a trained CRNN as ONNX or TorchScript (dynamic batch and width), verified against PyTorch."""
from __future__ import annotations

import argparse
import sys

PROG = "crnn-export"
EPILOG = """examples:
  crnn-export --weights en --format onnx --out crnn.onnx
  crnn-export --weights runs/synth_cpu/best.pt --format torchscript --out crnn.ts.pt --width 128
  crnn-export --weights zh --format onnx --out crnn_zh.onnx      (the shipped Chinese line model)

The graph takes images [batch, channels, height, width] normalised to [-1, 1] (pixel / 127.5 - 1; models
converted from other repositories may store another filter/mean/std: see the metadata "normalize") and
returns logits [batch, time, classes] (blank = 0); batch and width are dynamic. Before the file is moved
into place it is reloaded (TorchScript) or run with onnxruntime (ONNX) on two batch sizes and widths and
must match PyTorch within --atol. Charset and preprocessing settings are stored inside the file
(TorchScript extra file crnn.json, ONNX metadata key "crnn"). TorchScript is deprecated upstream; prefer ONNX.
The file is for other runtimes: crnn-predict, crnn-eval and crnn-serve read the .pt it came from, and refuse the
export in one line; docs/export.md reads the ONNX file with numpy, Pillow and onnxruntime alone.
"""


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of crnn-export."""
    from crnn.infer import shipped_names_help

    p = argparse.ArgumentParser(prog=PROG, description=__doc__, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", help="checkpoint (any crnn layout) or a shipped model's name: "
                        f"{shipped_names_help()}. Default: en. A path that exists wins over a name")
    p.add_argument("--format", choices=("onnx", "torchscript"), required=True, help="output format")
    p.add_argument("--out", required=True, help="file to write (atomically: temp file, verify, rename)")
    p.add_argument("--width", type=int, help="example input width for tracing (default: the trained data.width)")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (default: 17)")
    p.add_argument("--atol", type=float, default=1e-4, help="largest allowed |exported - PyTorch| (default: 1e-4)")
    p.add_argument("--config", help="YAML config for a bare state dict that stores none")
    p.add_argument("--charset", help="charset for a bare state dict")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of crnn-export."""
    args = build_parser().parse_args(argv)
    from crnn.charset import CharsetError
    from crnn.config import ConfigError
    from crnn.engine.checkpoint import CheckpointError, build_from_checkpoint, load_checkpoint
    from crnn.export import ExportError, export_model
    from crnn.infer import InferenceError, fallback_spec, resolve_weights

    try:
        weights = resolve_weights(args.weights)
        config, charset = fallback_spec(args.config, args.charset)
        model, cs, cfg = build_from_checkpoint(load_checkpoint(weights), "cpu", config=config, charset=charset)
        report = export_model(model, cs, cfg, args.out, args.format, width=args.width, atol=args.atol,
                              opset=args.opset)
    except (CheckpointError, ExportError, InferenceError, ConfigError, CharsetError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2 if not isinstance(e, ExportError) else 1
    except OSError as e:
        print(f"{PROG}: error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return 1
    shapes = ", ".join("x".join(map(str, s)) for s in report.shapes)
    if report.verified_with:
        print(f"wrote {report.path} ({report.format}); checked with {report.verified_with} on inputs {shapes}: "
              f"max |diff| {report.max_abs_diff:.2e} <= {args.atol:g}")
    else:
        print(f"wrote {report.path} ({report.format}); {report.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
