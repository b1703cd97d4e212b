"""crnn: CRNN scene-text recognition — training, evaluation and inference.

    import crnn
    reader = crnn.Recognizer()                       # the shipped model in weights/
    print(reader.read("word.png").text)

The public names (``__all__``, defined in crnn.api) are loaded on first use, so ``import crnn`` does not import torch.
"""
import importlib as _importlib
import os as _os
import typing as _typing

# oneDNN (torch's CPU kernels) keeps the last 1,024 kernels it compiled, one per layer and input shape. A keep-ratio
# model reads each item at its own width, and items of ~150 widths need more: every call compiled again, and a line
# read 1.5x (float32) to 3x (bf16) slower (benchmarks/bench_kernel_cache.py). Room for them, in place before the first
# kernel is built (oneDNN reads it then); a value already in the environment wins.
_os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16384")

__version__ = "0.1.0"
__all__ = ["Recognizer", "Reading", "TrainSummary", "load_config", "train", "evaluate", "serve"]

if _typing.TYPE_CHECKING:
    from crnn.api import Reading, Recognizer, TrainSummary, evaluate, load_config, serve, train  # noqa: F401


def __getattr__(name: str) -> object:
    """Import the public API (crnn.api) the first time one of its names is used."""
    if name in __all__:
        value = getattr(_importlib.import_module("crnn.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crnn' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
