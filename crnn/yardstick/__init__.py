"""The yardstick: our model beside other OCR systems on the same crops, scored and timed the same way.

``readers`` builds a :class:`~crnn.yardstick.readers.Reader` (a name, ``read(image) -> text`` and how it was built)
for any of our checkpoints and for the peers (PP-OCRv4 and PP-OCRv6 small through RapidOCR, EasyOCR's english_g2:
``pip install 'crnn[peers]'``); ``run`` reads sets with them (a reader that raises is recorded with its crop and
counts as wrong), scores the readings under a named protocol, and times every reader one item per call in
interleaved rounds whose order alternates. ``crnn-eval --against`` and ``scripts/en_benchmark.py`` /
``scripts/zh_benchmark.py`` are built on it; docs/compare.md says what each peer is and why one per call.
"""
