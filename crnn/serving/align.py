"""Per-character confidences of a CTC reading: the most likely alignment of the read text (Viterbi), and for each
character the highest probability the model gave it on the time steps aligned to it."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from crnn.charset import BLANK

NEG_INF = float("-inf")


def best_alignment(log_probs: torch.Tensor, ids: Sequence[int]) -> list[int]:
    """The most likely CTC path of labelling ``ids`` under ``log_probs [T, K]`` -> per time step the index of the
    character it emits (-1 for blank)."""
    T, L = log_probs.shape[0], len(ids)
    ext = torch.full((2 * L + 1,), BLANK, dtype=torch.long)  # [S] blank, l1, blank, l2, ..., blank
    ext[1::2] = torch.as_tensor(list(ids), dtype=torch.long)
    S = ext.numel()
    skip = torch.zeros(S, dtype=torch.bool)  # [S] may come from s-2 (a character unlike the one before it)
    skip[3::2] = ext[3::2] != ext[1:-2:2]
    emit = log_probs[:, ext].double()  # [T, S]
    score = torch.full((S,), NEG_INF, dtype=torch.float64)
    score[:2] = emit[0, :2]
    back = torch.zeros((T, S), dtype=torch.long)  # [T, S] the state each best path came from
    back[0] = torch.arange(S)
    idx = torch.arange(S)
    for t in range(1, T):
        stay = score
        step = torch.cat([score.new_full((1,), NEG_INF), score[:-1]])
        jump = torch.cat([score.new_full((2,), NEG_INF), score[:-2]]).masked_fill(~skip, NEG_INF)
        cand = torch.stack([stay, step, jump])  # [3, S]
        best, how = cand.max(0)
        back[t] = idx - how
        score = best + emit[t]
    s = S - 1 if S == 1 or score[S - 1] >= score[S - 2] else S - 2
    path = [0] * T
    for t in range(T - 1, -1, -1):
        path[t] = (s - 1) // 2 if s % 2 else -1
        s = int(back[t, s])
    return path


def char_confidences(log_probs: torch.Tensor, ids: Sequence[int]) -> list[float]:
    """For each character of the labelling ``ids``: the highest probability on its aligned steps (0-1)."""
    if not ids:
        return []
    path = best_alignment(log_probs, ids)
    best = [0.0] * len(ids)
    for t, k in enumerate(path):
        if k >= 0:
            best[k] = max(best[k], float(log_probs[t, ids[k]].exp()))
    return best
