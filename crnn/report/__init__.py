"""The evaluation report (``crnn-eval --report DIR``): a static HTML page of what a model gets wrong.

``analysis`` turns per-image samples into confusions and per-bin accuracies (pure Python), ``svg`` draws the charts,
``render`` writes the pages and crops, ``collect`` gathers the samples during evaluation.
"""
