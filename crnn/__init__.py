"""crnn: CRNN scene-text recognition — training, evaluation and inference.

    import crnn
    reader = crnn.Recognizer()                       # the shipped model in weights/
    print(reader.read("word.png").text)

The public names (``__all__``, defined in crnn.api) are loaded on first use, so ``import crnn`` does not import torch.
"""
import importlib as _importlib
import typing as _typing

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
