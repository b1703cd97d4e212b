"""crnn: CRNN scene-text recognition — training, evaluation and inference."""
__version__ = "0.1.0"
