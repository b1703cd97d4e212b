"""Fine-tuning without forgetting, the part that acts on the model: the base domain scored before and after, the
pull toward the starting weights, freezing, interpolation and the teacher. Its data - the rehearsal source mixed into
every batch, the base-style sets and their generation - is :mod:`crnn.data.rehearsal`; this module loads the starting
checkpoint's stored config for it (:func:`start_config`).

* ``train.base_val``: general held-out sets (a synthetic one generated with another seed, ``train.base_val_num``, or
  real crops the user names) scored at step 0, at every validation and at the end with ``train.base_protocol``
  (``auto``: the protocol of the starting checkpoint's alphabet, so an ``alnum36`` base is scored case-insensitive
  as it was trained). The log, TensorBoard (``base/<name>/...``) and the run's summary show before and after.
* ``train.base_pull``: L2-SP (Li, Grandvalet & Davoine, ICML 2018), a penalty ``alpha / 2 * ||w - w_base||^2`` added
  to the loss that pulls every weight the starting model had (CNN, LSTMs, the output rows of its characters and of
  the blank) back toward its starting value; fresh rows (new characters, upper case started from lower case) are
  free.
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from crnn.charset import Charset
from crnn.config import Config
from crnn.engine.evaluate import evaluate
from crnn.engine.runtime import Runtime, TrainingError
from crnn.metrics import format_rates, resolve_protocol

log = logging.getLogger("crnn")

KEPT_METRICS = ("samples", "word_acc", "cer", "ned_similarity")


def start_config(cfg: Config) -> Config | None:
    """The config stored in ``train.init_weights`` (None without one), which ``data.rehearsal_style: base`` renders
    its words from; an unreadable start, or none, is a TrainingError."""
    from crnn.engine.checkpoint import CheckpointError, load_checkpoint, stored_config

    path = cfg.train.init_weights
    if not path:
        raise TrainingError("data.rehearsal_style=base renders words as train.init_weights was trained: set it")
    try:
        return stored_config(load_checkpoint(path))
    except CheckpointError as e:
        raise TrainingError(f"data.rehearsal_style=base: {e}") from None


class ValSets(dict):
    """The validation loaders by path (the user's sets: they choose best.pt) plus the base-domain sets.

    ``last`` holds the latest metrics of every set, ``before`` those measured at step 0."""

    def __init__(self, user: dict, base: dict, base_protocol: str) -> None:
        super().__init__(user)
        self.base = base
        self.base_protocol = base_protocol
        self.last: dict[str, dict] = {}

    def __bool__(self) -> bool:
        return bool(len(self) or self.base)


def base_protocol(cfg: Config, base_charset: Charset | None, charset: Charset) -> str:
    """``train.base_protocol`` resolved: ``auto`` follows the alphabet the starting weights were trained with."""
    return resolve_protocol(cfg.train.base_protocol, (base_charset or charset).chars)


def validate_base(model, vals: ValSets, charset: Charset, cfg: Config, rt: Runtime, step: int, tb) -> None:
    """Score the base-domain sets (a collective under DDP); log one line each and write ``base/<name>/*``."""
    for name, loader in vals.base.items():
        res = evaluate(model, loader, charset, rt.device, protocol=vals.base_protocol, decoder=cfg.train.decoder,
                       amp=cfg.train.amp, max_examples=0)
        m = {k: res.metrics[k] for k in KEPT_METRICS}
        vals.last[name] = m
        if not rt.main:
            continue
        log.info("base %s @ %d: %s  (%d samples, %s)", name, step, format_rates(m, res.cer_first), m["samples"],
                 vals.base_protocol)
        if tb is not None:
            tag = Path(name).name or name
            for k in ("word_acc", "cer", "ned_similarity"):
                tb.add_scalar(f"base/{tag}/{k}", m[k], step)


def forgetting_report(before: dict, after: dict, base: list[str], user: list[str]) -> list[str]:
    """Lines comparing word accuracy before and after, base domain first: ``base svt_train: 63.4 % -> 62.7 %
    (-0.7 points)``."""
    lines = []
    for kind, names in (("base", base), ("your data", user)):
        for name in names:
            if name in before and name in after:
                a, b = 100 * before[name]["word_acc"], 100 * after[name]["word_acc"]
                lines.append(f"{kind} {name}: {a:.1f} % -> {b:.1f} % ({b - a:+.1f} points)")
    return lines


class BasePull:
    """L2-SP: ``alpha / 2 * sum (w - w_base)^2`` over the starting model's weights (:attr:`refs`), as a loss term.

    ``rows``: for the output layer's weight and bias (by parameter name), the rows that came from the starting model
    (blank and kept characters); only they are pulled. Every other parameter is pulled whole. BatchNorm statistics are
    buffers, not weights: ``train.freeze_cnn_steps`` keeps those."""

    def __init__(self, model: torch.nn.Module, alpha: float, rows: dict[str, list[int]] | None = None) -> None:
        self.alpha = alpha
        self.refs: list[tuple[torch.nn.Parameter, torch.Tensor, torch.Tensor | None]] = []
        for name, p in model.named_parameters():
            idx = None if rows is None or name not in rows else torch.tensor(rows[name], dtype=torch.long,
                                                                               device=p.device)
            ref = p.detach().clone() if idx is None else p.detach().index_select(0, idx).clone()
            self.refs.append((p, ref, idx))

    @property
    def num_weights(self) -> int:
        """How many numbers are pulled."""
        return sum(ref.numel() for _, ref, _ in self.refs)

    def distance(self) -> float:
        """``||w - w_base||`` over the pulled weights (for the log)."""
        with torch.no_grad():
            return float(self._sum_squares()) ** 0.5

    def _sum_squares(self) -> torch.Tensor:
        total = torch.zeros((), device=self.refs[0][1].device if self.refs else "cpu")
        for p, ref, idx in self.refs:
            cur = p if idx is None else p.index_select(0, idx)
            total = total + (cur.float() - ref.float()).pow(2).sum().to(total.device)  # model parallel: 2 devices
        return total

    def penalty(self) -> torch.Tensor:
        """The loss term; its gradient for a weight is ``alpha * (w - w_base)``, zero at the starting weights."""
        return 0.5 * self.alpha * self._sum_squares()


def base_rows(model: torch.nn.Module, charset: Charset, change) -> dict[str, list[int]] | None:
    """The output rows that came from the starting model (blank and kept characters) by parameter name, or None
    when every row did (the same alphabet, or a checkpoint without a stored one)."""
    if change is None or change.unchanged:
        return None
    from crnn.engine.alphabet_change import output_layer_keys

    kept = set(change.kept)
    rows = [0] + [j for j, c in enumerate(charset.chars, 1) if c in kept]
    return {key: rows for key in output_layer_keys(model)}


def build_base_pull(cfg: Config, bare: torch.nn.Module, charset: Charset, change, main: bool) -> BasePull | None:
    """The run's :class:`BasePull` (None with ``train.base_pull`` 0); built before a resumed state is loaded, so that
    it pulls toward ``train.init_weights``, not toward the checkpoint."""
    alpha = cfg.train.base_pull
    if alpha <= 0:
        return None
    if not cfg.train.init_weights:
        raise TrainingError(f"train.base_pull={alpha} pulls toward the starting weights: set train.init_weights")
    pull = BasePull(bare, alpha, base_rows(bare, charset, change))
    if main:
        log.info("train.base_pull=%g: L2-SP toward %s over %.2f M weights%s", alpha, cfg.train.init_weights,
                 pull.num_weights / 1e6, "" if change is None or change.unchanged else
                 f" (output rows of the blank and the {len(change.kept)} kept characters; new rows are free)")
    return pull


def cnn_frozen(cfg: Config, step: int) -> bool:
    """Whether the CNN is frozen at ``step``: ``train.freeze_cnn_steps`` N > 0 freezes it for steps 0..N-1, -1 for
    the whole run."""
    n = cfg.train.freeze_cnn_steps
    return n < 0 or step < n


def set_cnn_frozen(bare, frozen: bool, step: int, main: bool) -> None:
    """Freeze or unfreeze the CNN: its weights (no gradients are computed for them: a frozen step is also faster)
    and its BatchNorm running statistics (momentum 0 while frozen, so that the features the base model read its
    domain with stay exactly as they were; a batch is still normalised by its own statistics in training mode).
    Logs only when the state changes."""
    params = list(bare.cnn.parameters())
    if all(p.requires_grad != frozen for p in params):
        return
    for p in params:
        p.requires_grad_(not frozen)
    for m in bare.cnn.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            if frozen:
                m._crnn_momentum = getattr(m, "_crnn_momentum", m.momentum)
                m.momentum = 0.0
            elif hasattr(m, "_crnn_momentum"):
                m.momentum = m._crnn_momentum
                del m._crnn_momentum
    if main:
        log.info("step %d: CNN %s (train.freeze_cnn_steps)", step, "frozen" if frozen else "unfrozen: training "
                 "every layer from here")


def _normalise_with_running_statistics(module: torch.nn.Module, args) -> None:
    """Forward pre-hook of a frozen BatchNorm layer: evaluation mode for this call, whatever ``model.train()`` set."""
    module.training = False


def freeze_bn_statistics(bare: torch.nn.Module, main: bool) -> int:
    """``train.freeze_bn``: every BatchNorm layer normalises with its starting running statistics for the whole run,
    in training steps as in evaluation, and never updates them (its scale and shift still learn when trained). The
    network then computes in training exactly what it computes when read, and the statistics the base model read
    its domain with stay as they were however the batches look (half of them are the user's crops). Returns how
    many layers."""
    layers = [m for m in bare.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in layers:
        m.register_forward_pre_hook(_normalise_with_running_statistics)
    if main and layers:
        log.info("train.freeze_bn: %d BatchNorm layers normalise with the starting statistics for the whole run",
                 len(layers))
    return len(layers)


def check_freeze(cfg: Config, mode: str) -> None:
    """DDP fixes the set of trained parameters when it wraps the model: only a whole-run freeze (-1) works there."""
    if mode == "ddp" and cfg.train.freeze_cnn_steps > 0:
        raise TrainingError(f"train.freeze_cnn_steps={cfg.train.freeze_cnn_steps}: unfreezing during a run is not "
                            "possible under DDP; use -1 (frozen for the whole run) or 0")


INTERPOLATED = "interpolated.pt"


def interpolate_into(bare: torch.nn.Module, start, charset: Charset, alpha: float) -> None:
    """Load ``(1 - alpha) * start + alpha * bare`` into ``bare`` (:mod:`crnn.engine.interpolate`; ``start`` a loaded
    :class:`~crnn.engine.checkpoint.Checkpoint`, ``bare`` trained for ``charset``)."""
    from crnn.engine.checkpoint import Checkpoint, clean_state_dict
    from crnn.engine.interpolate import interpolate_checkpoints

    trained = Checkpoint("the trained model", {k: v.detach().cpu() for k, v in
                                               clean_state_dict(bare.state_dict()).items()}, charset=charset.to_dict())
    bare.load_state_dict(interpolate_checkpoints(start, trained, bare, alpha), strict=True)


def write_interpolated(cfg: Config, bare: torch.nn.Module, charset: Charset, start, main: bool) -> Path:
    """``train.interpolate_base``: the trained ``bare`` becomes its interpolation with the starting weights, saved
    as ``interpolated.pt`` (weights only, main process; the caller barriers and scores it)."""
    from crnn.engine.checkpoint import model_checkpoint, save_checkpoint

    alpha = cfg.train.interpolate_base
    interpolate_into(bare, start, charset, alpha)
    path = Path(cfg.train.output_dir) / INTERPOLATED
    if main:
        save_checkpoint(model_checkpoint(bare, cfg, charset, interpolated={"start": cfg.train.init_weights,
                                                                           "alpha": alpha}), path)
        log.info("train.interpolate_base=%g: %s = %g x %s + %g x the trained weights (last.pt; rows of new "
                 "characters: the trained ones); the model to read", alpha, path, 1 - alpha, cfg.train.init_weights,
                 alpha)
    return path


class BaseTeacher:
    """``train.distill_base``: the starting model, frozen, as a teacher (learning without forgetting; Li & Hoiem,
    2016). On every sample of a batch whose label the starting model could read (every character in its alphabet,
    case folded when it folds case: the rehearsal words, plain digit codes), the loss gains
    ``alpha * KL(p_base || q)`` per output frame (mean over the valid frames, then over those samples), where ``q``
    is the fine-tuned model's distribution folded onto the starting alphabet: an upper-case letter's probability
    counts for the lower-case letter the base read it as; new characters count for nothing (their mass is loss);
    characters of the base that the new alphabet dropped are left out of both, the base's distribution renormalised
    over the rest. A start that keeps case (printable95) folds nothing: ``q`` is the trained model's distribution
    over the start's classes. The fine-tuned model keeps reading what the base read, with the base's own
    confidences (its soft targets carry more than the hard labels: which letters look alike, how sure it is under
    blur), while CTC on the labels decides the case and teaches the new characters. The teacher reads the same
    tensor as the student (its geometry), in evaluation mode.

    ``new_alpha`` (``train.distill_new``, 0 = off): the samples whose labels have characters the base never read
    (the new kind of text itself) are taught too, with ``q`` renormalised over the starting classes: what the student
    puts on new characters is neither pushed down nor counted, and among the base's classes it keeps the base's
    letter identities on the new glyphs (the capitals of printed codes, where fine-tuning drifts them). That term is
    ``new_alpha`` x its own mean over those samples."""

    def __init__(self, model: torch.nn.Module, base_charset: Charset, charset: Charset, alpha: float,
                 new_alpha: float = 0.0) -> None:
        from crnn.engine.alphabet_change import _source_rows

        self.model, self.alpha, self.new_alpha = model, alpha, new_alpha
        rows, _ = _source_rows(base_charset, charset)  # student class -> base class (None: new character)
        pairs = [(j, src) for j, src in enumerate(rows) if src is not None]
        # base classes no student row reads (characters the new alphabet dropped) are left out of both distributions,
        # the teacher's renormalised over the rest (else log q = -inf there: an infinite KL, NaN gradients); None:
        # every base class is kept
        used = sorted({src for _, src in pairs})
        self.kept = None if len(used) == base_charset.num_classes else torch.tensor(used, dtype=torch.long)
        column = {src: i for i, src in enumerate(used)}
        # the fold as two index vectors, never a [K, K_base] matrix (6,895 x 6,895 for a Chinese start; its
        # log-sum-exp over [B, T, K, K_base] would be hundreds of GB): student row rows[i] counts for the kept base
        # class cols[i] (two rows for one class where case is folded; rows of new characters are in neither)
        self.rows = torch.tensor([j for j, _ in pairs], dtype=torch.long)
        self.cols = torch.tensor([column[src] for _, src in pairs], dtype=torch.long)
        self.num_cols = len(used)
        self.base_charset = base_charset
        self.known = set(base_charset.chars)

    def fold(self, student: torch.Tensor) -> torch.Tensor:
        """Log-probabilities [b, T, K] over the new alphabet -> [b, T, Kb'] over the kept base classes: for each,
        the log-sum-exp of the student rows that count for it (shifted by the group's max, so exact and finite)."""
        s = student.index_select(-1, self.rows.to(student.device))  # [b, T, K'] the rows with a base class
        cols = self.cols.to(student.device).expand_as(s)
        shape = (*s.shape[:-1], self.num_cols)
        top = s.new_full(shape, float("-inf")).scatter_reduce(-1, cols, s, "amax").detach()  # [b, T, Kb']
        total = s.new_zeros(shape).scatter_add(-1, cols, (s - top.gather(-1, cols)).exp())
        return top + total.log()

    def reads(self, label: str) -> bool:
        """Whether the starting model could read ``label`` (every character in its alphabet, case folded where it
        folds case)."""
        text = label.lower() if self.base_charset.lowercase else label
        return bool(text) and all(c in self.known for c in text)

    def loss(self, logits: torch.Tensor, images: torch.Tensor, labels: list[str],
             steps: torch.Tensor) -> tuple[torch.Tensor, int]:
        """(``alpha`` x the mean per-frame KL over the samples the base could read [+ ``new_alpha`` x that over the
        others, renormalised], how many samples were taught) for the student's ``logits`` [B, T, K] of ``images``;
        ``steps`` [B]: valid frames per sample."""
        readable = [self.reads(label) for label in labels]
        pick = [i for i, label in enumerate(labels) if label and (readable[i] or self.new_alpha > 0)]
        if not pick:
            return logits.new_zeros((), dtype=torch.float32), 0
        idx = torch.tensor(pick, dtype=torch.long, device=images.device)
        with torch.no_grad():
            teacher = self.model(images.index_select(0, idx)).float().log_softmax(-1)  # [b, T, Kb]
        student = logits.index_select(0, idx.to(logits.device)).float().log_softmax(-1)  # [b, T, K]
        folded = self.fold(student)  # [b, T, Kb']: log of the folded probs
        if self.kept is not None:  # the teacher over the base classes the new alphabet keeps, renormalised
            teacher = teacher.to(student.device).index_select(-1, self.kept.to(student.device))
            teacher = teacher - torch.logsumexp(teacher, dim=-1, keepdim=True)
        flags = [readable[i] for i in pick]  # the base read the label (a list: no device sync to branch on)
        old = torch.tensor(flags, device=student.device)  # [b]
        if not all(flags):  # renormalise over the base's classes where the label has new characters
            renorm = folded - torch.logsumexp(folded, dim=-1, keepdim=True)
            folded = torch.where(old[:, None, None], folded, renorm)
        teacher = teacher.to(student.device)
        kl = (teacher.exp() * (teacher - folded)).sum(-1)  # [b, T]
        valid = torch.arange(kl.shape[1], device=kl.device)[None, :] < steps.to(kl.device)[idx.to(kl.device), None]
        per_sample = (kl * valid).sum(1) / valid.sum(1).clamp(min=1)
        total = per_sample.new_zeros(())
        if any(flags):
            total = total + self.alpha * per_sample[old].mean()
        if not all(flags):
            total = total + self.new_alpha * per_sample[~old].mean()
        return total, len(pick)


def build_teacher(cfg: Config, ck, base_charset: Charset | None, charset: Charset, device,
                  main: bool) -> BaseTeacher | None:
    """The run's :class:`BaseTeacher` from the loaded ``train.init_weights`` checkpoint ``ck`` (None with
    ``train.distill_base`` 0)."""
    alpha = cfg.train.distill_base
    if alpha <= 0:
        return None
    if ck is None:
        raise TrainingError(f"train.distill_base={alpha} distils the starting model: set train.init_weights")
    if cfg.train.model_parallel:
        raise TrainingError("train.distill_base does not work with train.model_parallel (the teacher is a whole "
                            "model on one device); set train.distill_base=0")
    from crnn.engine.checkpoint import load_model_weights
    from crnn.model import build_model_from

    cs = base_charset or charset  # a checkpoint without a stored alphabet has the run's (it loaded as it is)
    m = cfg.model  # the run's architecture: init_weights loaded into it strictly, so it is the teacher's too
    model = build_model_from(m, cs.num_classes)
    load_model_weights(model, ck.model_state, strict=True)
    model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if cfg.train.channels_last:
        model.to(memory_format=torch.channels_last)
    teacher = BaseTeacher(model, cs, charset, alpha, cfg.train.distill_new)
    if main:
        log.info("train.distill_base=%g: the starting model (%s, %d classes) teaches every sample whose label it "
                 "could read (KL per frame, %s)", alpha, cfg.train.init_weights, cs.num_classes,
                 "upper case folded onto lower case" if cs.lowercase else "the same characters, case kept")
        if cfg.train.distill_new > 0:
            log.info("train.distill_new=%g: it teaches the samples with new characters too, the trained model's "
                     "distribution renormalised over the start's %d classes", cfg.train.distill_new, cs.num_classes)
    return teacher
