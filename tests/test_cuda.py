"""Every CUDA path, compared with the CPU: training steps (fp32, fp16 + GradScaler, bf16, channels_last), CTC (cuDNN
and native kernels, labels longer than cuDNN takes), DataParallel's batch-first gather, DDP with NCCL and SyncBN under
torchrun with a kill-and-resume, checkpoints moving between CUDA and CPU, crnn-predict / crnn.Recognizer, ONNX export of
a CUDA-trained model and the cudnn.benchmark decision for keep-ratio batches.

The tests marked ``cuda`` skip (with the reason) where torch sees no GPU; ``bash scripts/gpu_session.sh`` runs them on
a lent one. The comparison helpers themselves run on the CPU too (the unmarked tests at the top), so a GPU session
finds them already proven.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from crnn.charset import Charset
from crnn.config import Config
from crnn.data.collate import Batch
from crnn.engine.optim import build_optimizer, build_scaler, build_scheduler
from crnn.engine.runtime import Runtime, configure_cudnn, cudnn_benchmark_wanted
from crnn.engine.trainer import build_training_model, optimizer_step, train_step
from crnn.loss import ctc_loss
from tests.conftest import REPO, render_png

HAS_CUDA = torch.cuda.is_available()
cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
N_GPU = torch.cuda.device_count() if HAS_CUDA else 0
needs_two_gpus = pytest.mark.skipif(N_GPU < 2, reason=f"needs two CUDA GPUs (torch sees {N_GPU}); the lent GPU "
                                                      "machines have one, so this runs only on a multi-GPU host")
CHARSET = "alnum36"
TINY = ["data.batch_size=8", "data.num_workers=0", "train.log_every=1", "train.warmup_steps=0",
        "train.tensorboard=false", "train.show_predictions=0", "train.val_every=0", "data.val=[]"]
PY_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable,
          "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
          "PYTHONUNBUFFERED": "1"}


@pytest.fixture(autouse=True)
def _exact_fp32():
    """fp32 means fp32 here: no TF32 matmuls/convolutions (they differ from the CPU by ~1e-3 by design)."""
    if not HAS_CUDA:
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = old


# ----------------------------------------------------------------------------- helpers (device-agnostic)
def random_batches(n: int, batch_size: int, seed: int = 0, width: int = 100, label_len: tuple[int, int] = (3, 10)):
    """``n`` batches of images in [-1, 1] and random alnum36 labels (CPU tensors)."""
    g = torch.Generator().manual_seed(seed)
    charset = Charset.from_spec(CHARSET)
    out = []
    for _ in range(n):
        images = torch.rand(batch_size, 1, 32, width, generator=g) * 2 - 1  # (B, 1, 32, W)
        lengths = torch.randint(label_len[0], label_len[1] + 1, (batch_size,), generator=g)
        targets = torch.randint(1, charset.num_classes, (int(lengths.sum()),), generator=g)
        labels = [charset.decode(t.tolist()) for t in targets.split(lengths.tolist())]
        out.append(Batch(images, targets, lengths, labels, torch.full((batch_size,), width)))
    return out


def step_config(amp: str = "off", channels_last: bool = False, variant: str = "vgg_small") -> Config:
    """Adam at a constant LR with clipping, as bench_train's crnn side."""
    cfg = Config()
    cfg.model.variant, cfg.model.charset = variant, CHARSET
    t = cfg.train
    t.amp, t.channels_last, t.compile = amp, channels_last, False
    t.optimizer, t.lr, t.grad_clip, t.schedule, t.warmup_steps = "adam", 1e-3, 5.0, "constant", 0
    return cfg


def train_losses(device: str, batches: list[Batch], amp: str = "off", channels_last: bool = False,
                 seed: int = 0) -> tuple[list[float], list[bool], dict[str, torch.Tensor]]:
    """Losses, per-step 'update applied' flags and the final CPU state dict of crnn's own steps on ``device``,
    from the weights ``torch.manual_seed(seed)`` gives."""
    cfg = step_config(amp, channels_last)
    cfg.train.device = device
    rt = Runtime(torch.device(device), "single")
    torch.manual_seed(seed)
    model, bare = build_training_model(cfg, Charset.from_spec(CHARSET), rt)
    opt, scaler = build_optimizer(cfg, model), build_scaler(cfg, rt)
    sched = build_scheduler(cfg, opt)
    model.train()
    losses, applied = [], []
    for batch in batches:
        loss, _ = train_step(model, batch, opt, scaler, cfg, rt, True, bare)
        applied.append(optimizer_step(model, opt, sched, scaler, cfg))
        losses.append(loss)
    return losses, applied, {k: v.detach().float().cpu() for k, v in bare.state_dict().items()}


def rel_diff(a: dict[str, torch.Tensor] | torch.Tensor, b: dict[str, torch.Tensor] | torch.Tensor) -> float:
    """||a - b|| / ||b|| over all floating tensors (state dicts compared key by key, keys must match)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
        keys = [k for k in a if b[k].is_floating_point()]
        a = torch.cat([a[k].double().flatten() for k in keys])
        b = torch.cat([b[k].double().flatten() for k in keys])
    a, b = a.double().cpu(), b.double().cpu()
    assert torch.isfinite(a).all(), "non-finite values"
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def ctc_case(batch: int, T: int, K: int, label_len: int, seed: int = 0):
    """Random logits [B, T, K] and labels of ``label_len`` characters (no blanks) for a CTC comparison."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, T, K, generator=g)  # (B, T, K)
    lengths = torch.full((batch,), label_len, dtype=torch.long)
    targets = torch.randint(1, K, (batch * label_len,), generator=g)
    return logits, targets, lengths


def ctc_loss_and_grad(logits: torch.Tensor, targets: torch.Tensor, lengths: torch.Tensor, device: str,
                      path: str = "crnn") -> tuple[float, torch.Tensor]:
    """(loss, d loss / d logits on the CPU) on ``device``. ``path``: "crnn" = crnn.loss.ctc_loss (long targets on the
    logits' device: the native kernel on CUDA); "cudnn" = the form cuDNN accepts (int32 CPU targets, every input
    length = T, labels <= 256), checked with torch._use_cudnn_ctc_loss."""
    x = logits.detach().to(device).requires_grad_(True)
    if path == "crnn":
        loss = ctc_loss(x, targets, lengths).loss
    else:
        B, T, _ = x.shape
        log_probs = x.log_softmax(-1).permute(1, 0, 2)  # (T, B, K)
        il, tl, tg = torch.full((B,), T, dtype=torch.int32), lengths.to(torch.int32), targets.to(torch.int32)
        if device != "cpu":
            assert torch._use_cudnn_ctc_loss(log_probs, tg, il, tl, 0), "cuDNN would not take this CTC case"
        loss = F.ctc_loss(log_probs, tg, il, tl, blank=0, reduction="mean", zero_infinity=True)
    loss.backward()
    return float(loss.detach()), x.grad.detach().cpu()


def read_texts(device: str, paths: list[Path]) -> list[str]:
    """The shipped model's greedy readings of ``paths`` on ``device`` through crnn.Recognizer."""
    from crnn.api import Recognizer

    return [r.text for r in Recognizer(device=device).read([str(p) for p in paths])]


def sample_images(tmp_path: Path) -> list[Path]:
    """The shipped sample crops plus a few rendered words."""
    paths = sorted((REPO / "weights/samples").glob("*.png"))
    for i, word in enumerate(["cuda", "tensor", "h100", "crnn2024"]):
        p = tmp_path / f"r{i}.png"
        p.write_bytes(render_png(word))
        paths.append(p)
    return paths


def train_cli(out: Path, train_lmdb: Path, *extra: str) -> list[str]:
    return [f"data.train=[{{path: {train_lmdb}}}]", f"train.output_dir={out}", *TINY, *extra]


# ----------------------------------------------------------------------------- the helpers, on the CPU
@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared, busy CPU two threads made these few tiny steps take a minute."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_train_losses_is_deterministic_and_learns_on_cpu(one_thread):
    batches = random_batches(3, 4, seed=1)
    a, ok_a, sa = train_losses("cpu", batches)
    b, ok_b, sb = train_losses("cpu", batches)
    assert a == b and rel_diff(sa, sb) == 0.0 and all(ok_a) and all(ok_b)
    _, _, s0 = train_losses("cpu", batches[:1])
    assert rel_diff(sa, s0) > 1e-6  # the later steps moved the weights: a comparison of states can fail


def test_rel_diff_and_ctc_helpers_on_cpu():
    assert rel_diff(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])) == 0.0
    assert rel_diff({"w": torch.tensor([3.0, 4.0])}, {"w": torch.tensor([0.0, 0.0]) + torch.tensor([3.0, 4.5])}) \
        == pytest.approx(0.5 / (3 ** 2 + 4.5 ** 2) ** 0.5)
    with pytest.raises(AssertionError):
        rel_diff(torch.tensor([float("nan")]), torch.tensor([1.0]))
    logits, targets, lengths = ctc_case(3, 40, 11, 12)
    ours, g_ours = ctc_loss_and_grad(logits, targets, lengths, "cpu", "crnn")
    plain, g_plain = ctc_loss_and_grad(logits, targets, lengths, "cpu", "cudnn")
    assert ours == pytest.approx(plain, rel=1e-5) and ours > 0
    torch.testing.assert_close(g_ours, g_plain, rtol=1e-4, atol=1e-6)


def test_cudnn_benchmark_is_off_only_for_batch_padded_keep_ratio():
    cfg = Config()
    assert cudnn_benchmark_wanted(cfg)
    cfg.data.keep_ratio = True
    assert not cudnn_benchmark_wanted(cfg)  # up to ~100 widths, each re-timed when it first appears
    cfg.data.pad = "edge"
    assert cudnn_benchmark_wanted(cfg)  # edge padding gives every image data.width
    assert configure_cudnn(cfg, torch.device("cpu")) is None  # nothing to decide off CUDA


def test_cuda_marker_is_registered():
    """``-m cuda`` selects these tests and ``-m 'not cuda'`` leaves them out without an unknown-marker warning."""
    cfg = (REPO / "setup.cfg").read_text(encoding="utf-8")
    assert re.search(r"^\s+cuda:", cfg, re.M), "setup.cfg [tool:pytest] markers has no cuda entry"


def test_skips_are_summarised_by_what_the_machine_lacks():
    """conftest's summary groups every skip reason this suite gives (CUDA, EasyOCR, fonts, Chromium, jieba, crops)."""
    from tests.conftest import skip_group

    cases = {
        "needs a CUDA GPU (torch.cuda.is_available() is False)": "a CUDA GPU",
        "needs two CUDA GPUs (torch sees 0); the lent GPU machines have one": "a CUDA GPU",
        "easyocr is not installed (pip install easyocr)": "EasyOCR",
        "DejaVu fonts not installed (apt-get install fonts-dejavu-core)": "fonts",
        "needs fonts-noto-cjk": "fonts",
        "Debian's chromium is not installed (scripts/setup.sh installs it as root)": "Chromium",
        "could not import 'jieba': No module named 'jieba'": "jieba",
        "the shared iiit5k_train crops are not available": "the shared real crops",
    }
    for reason, label in cases.items():
        assert skip_group(reason).startswith(label), (reason, skip_group(reason))
    assert skip_group("no Chinese model in this checkout") == "other: no Chinese model in this checkout"


# ----------------------------------------------------------------------------- training steps
@cuda
@needs_cuda
def test_fp32_steps_on_cuda_match_the_cpu():
    batches = random_batches(4, 16, seed=2)
    cpu, ok_cpu, s_cpu = train_losses("cpu", batches)
    gpu, ok_gpu, s_gpu = train_losses("cuda", batches)
    assert all(ok_cpu) and all(ok_gpu)
    assert gpu == pytest.approx(cpu, rel=1e-3, abs=1e-4), (cpu, gpu)
    assert rel_diff(s_gpu, s_cpu) < 1e-3


@cuda
@needs_cuda
@pytest.mark.parametrize("amp", ["fp16", "bf16"])
def test_amp_trains_without_nonfinite_steps_and_stays_close_to_fp32(amp):
    if amp == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    batches = random_batches(8, 32, seed=3)
    ref, _, s_ref = train_losses("cuda", batches)
    losses, applied, s_amp = train_losses("cuda", batches, amp=amp)
    assert all(applied), f"{amp}: skipped (non-finite) updates at steps {[i for i, a in enumerate(applied) if not a]}"
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses == pytest.approx(ref, rel=5e-2), (ref, losses)
    assert losses[-1] < losses[0]  # it learns
    assert rel_diff(s_amp, s_ref) < 5e-2


@cuda
@needs_cuda
def test_amp_fp16_uses_the_grad_scaler():
    cfg = step_config("fp16")
    scaler = build_scaler(cfg, Runtime(torch.device("cuda"), "single"))
    assert scaler is not None and scaler.is_enabled()


@cuda
@needs_cuda
def test_channels_last_steps_match_the_default_layout():
    batches = random_batches(3, 16, seed=4)
    ref, _, s_ref = train_losses("cuda", batches)
    cl, applied, s_cl = train_losses("cuda", batches, channels_last=True)
    assert all(applied)
    assert cl == pytest.approx(ref, rel=1e-3, abs=1e-4)
    assert rel_diff(s_cl, s_ref) < 1e-3


# ----------------------------------------------------------------------------- CTC
@cuda
@needs_cuda
@pytest.mark.parametrize("path", ["crnn", "cudnn"])
def test_ctc_on_cuda_matches_the_cpu(path):
    if path == "cudnn" and not torch.backends.cudnn.is_available():
        pytest.skip("cuDNN is not available")
    logits, targets, lengths = ctc_case(8, 26, 37, 10, seed=5)
    l_cpu, g_cpu = ctc_loss_and_grad(logits, targets, lengths, "cpu", "crnn")
    l_gpu, g_gpu = ctc_loss_and_grad(logits, targets, lengths, "cuda", path)
    assert l_gpu == pytest.approx(l_cpu, rel=1e-4)
    torch.testing.assert_close(g_gpu, g_cpu, rtol=1e-3, atol=1e-5)


@cuda
@needs_cuda
def test_ctc_with_labels_longer_than_cudnn_takes_matches_the_cpu():
    """cuDNN's CTC takes labels of at most 256; a 300-character line must still give the CPU's loss and gradient."""
    logits, targets, lengths = ctc_case(2, 640, 40, 300, seed=6)
    lp = logits.cuda().log_softmax(-1).permute(1, 0, 2)
    il = torch.full((2,), 640, dtype=torch.int32)
    assert not torch._use_cudnn_ctc_loss(lp, targets.int(), il, lengths.int(), 0)
    l_cpu, g_cpu = ctc_loss_and_grad(logits, targets, lengths, "cpu", "crnn")
    l_gpu, g_gpu = ctc_loss_and_grad(logits, targets, lengths, "cuda", "crnn")
    assert l_cpu > 0 and l_gpu == pytest.approx(l_cpu, rel=1e-4)
    torch.testing.assert_close(g_gpu, g_cpu, rtol=1e-3, atol=1e-5)


# ----------------------------------------------------------------------------- DataParallel
@cuda
@needs_cuda
def test_dataparallel_gather_of_batch_first_halves_is_the_whole_batch():
    """An odd batch of 65 comes back [65, T, K] equal to the bare model's when two halves are gathered along dim 0 as
    DataParallel gathers them (the time-major [65, 32, K] -> [130, 16, K] bug would show); one GPU is enough."""
    from crnn.model import build_model
    from torch.nn.parallel import gather

    torch.manual_seed(0)
    model = build_model("vgg_small", 1, 37).cuda().eval()
    x = torch.randn(65, 1, 32, 100, device="cuda")
    with torch.no_grad():
        ref = model(x)  # (B, T, K)
        out = gather([model(x[:33]), model(x[33:])], target_device=0, dim=0)
    assert ref.shape == (65, model.output_length(100), 37)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@cuda
@needs_two_gpus
def test_dataparallel_across_two_gpus_keeps_batch_first_output():
    """nn.DataParallel over every visible GPU: each replica gets a slice of the 65 samples and the output equals the
    bare model's [65, T, K]."""
    from crnn.model import build_model

    torch.manual_seed(0)
    model = build_model("vgg_small", 1, 37).cuda().eval()
    x = torch.randn(65, 1, 32, 100, device="cuda")
    dp = nn.DataParallel(model, device_ids=list(range(N_GPU)))
    seen = []
    hook = model.register_forward_hook(lambda m, i, o: seen.append((i[0].device, i[0].shape[0])))
    with torch.no_grad():
        ref = model(x)  # (B, T, K)
        seen.clear()
        out = dp(x)
    hook.remove()
    assert len({d for d, _ in seen}) == N_GPU and sum(b for _, b in seen) == 65, seen  # really split across GPUs
    assert out.shape == ref.shape == (65, model.output_length(100), 37)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@cuda
@needs_two_gpus
def test_train_parallel_dp_on_cuda_writes_plain_checkpoints(tmp_path, words_lmdb, caplog, monkeypatch):
    """train.parallel=dp on two or more GPUs: the model really is wrapped (with one GPU the runtime falls back to a
    single device and "no module. keys" would hold trivially), and the checkpoint still has plain keys."""
    from crnn.cli.train import main as train_main

    calls = []
    forward = nn.DataParallel.forward
    monkeypatch.setattr(nn.DataParallel, "forward", lambda self, *a, **k: calls.append(self.device_ids)
                        or forward(self, *a, **k))
    caplog.set_level("INFO", logger="crnn")
    out = tmp_path / "run"
    assert train_main(train_cli(out, words_lmdb, "train.steps=2", "train.parallel=dp", "train.device=cuda",
                                "train.amp=off")) == 0
    assert "mode: dp on cuda:0" in caplog.text and "needs at least 2 GPUs" not in caplog.text
    assert calls and all(ids == list(range(N_GPU)) for ids in calls), calls
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    assert ck["step"] == 2 and not any(k.startswith("module.") for k in ck["model"])


# ----------------------------------------------------------------------------- DDP (NCCL) under torchrun
def _train_ddp(out: Path, train_lmdb: Path, *extra: str) -> list[str]:
    return ["bash", str(REPO / "scripts/train_ddp.sh"), "--nproc", "1", "--max-restarts", "0",
            *train_cli(out, train_lmdb, "train.device=cuda", "train.backend=nccl", "train.sync_bn=true",
                       "train.amp=bf16", *extra)]


@cuda
@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ddp_nccl_single_process_converts_to_syncbn_and_trains(tmp_path, words_lmdb):
    """A conversion check: at world size 1 SyncBatchNorm has nobody to sync with (the two-GPU test below does)."""
    out = tmp_path / "run"
    res = subprocess.run(_train_ddp(out, words_lmdb, "train.steps=4"), capture_output=True, text=True,
                         timeout=280, env=PY_ENV, cwd=REPO)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-3000:]
    assert "SyncBatchNorm: converted" in log and "mode: ddp on cuda:0" in log, log[-3000:]
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    assert ck["step"] == 4 and not any(k.startswith("module.") for k in ck["model"])
    assert all(v.device.type == "cpu" for v in ck["model"].values())
    assert "terminate called" not in log


@cuda
@needs_cuda
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ddp_nccl_ctrl_c_then_resume_continues_at_the_same_step(tmp_path, words_lmdb):
    from tests.procs import kill_tree
    from tests.test_reliability import RESUMED, _step_of, _wait_for_checkpoint

    out, steps = tmp_path / "run", 100_000
    proc = subprocess.Popen(_train_ddp(out, words_lmdb, f"train.steps={steps}", "train.save_every=2"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=PY_ENV,
                            start_new_session=True)
    try:
        _wait_for_checkpoint(proc, out / "last.pt", 4)
        os.killpg(proc.pid, signal.SIGINT)
        log = proc.communicate(timeout=120)[0]
    finally:
        kill_tree(proc)
    stopped = _step_of(out / "last.pt")
    assert proc.returncode == 130 and f"stopped at step {stopped}/{steps} (signal)" in log, log[-3000:]
    res = subprocess.run(_train_ddp(out, words_lmdb, f"train.steps={stopped + 3}"), capture_output=True,
                         text=True, timeout=280, env=PY_ENV, cwd=REPO)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-3000:]
    assert RESUMED.findall(log) == [str(stopped)], log[-3000:]
    assert _step_of(out / "last.pt") == stopped + 3


SYNC_BN_SCRIPT = """
import copy, json, sys
import torch
from crnn.engine import distributed as D
from crnn.model import build_model

torch.backends.cudnn.allow_tf32 = False
info = D.init_distributed(sys.argv[2], "auto")
dev = torch.device(sys.argv[2], info.local_rank) if sys.argv[2] == "cuda" else torch.device("cpu")
torch.manual_seed(0)
bare = build_model("vgg_small", 1, 37)
whole, alone = copy.deepcopy(bare).to(dev).train(), copy.deepcopy(bare).to(dev).train()
if sys.argv[3] == "sync":
    bare = D.convert_sync_bn(bare)
model = D.wrap_ddp(bare.to(dev), dev, False).train()
g = torch.Generator().manual_seed(1)
x = torch.cat([torch.randn(4, 1, 32, 100, generator=g), torch.randn(4, 1, 32, 100, generator=g) + 3])  # halves differ
mine = x[4 * info.rank:4 * info.rank + 4].to(dev)
model(mine)
whole(x.to(dev))  # plain BatchNorm over the whole batch: what SyncBatchNorm over the ranks must give
alone(mine)  # plain BatchNorm over this rank's half: what it gives when nothing is synced
first = lambda m: next(b for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm))
stats = lambda b: torch.cat([b.running_mean, b.running_var]).cpu()
ours = stats(first(bare))
result = {"rank": info.rank, "layer": type(first(bare)).__name__,
          "vs_whole": float((ours - stats(first(whole))).abs().max()),
          "vs_alone": float((ours - stats(first(alone))).abs().max()), "scale": float(stats(first(whole)).abs().max())}
with open(sys.argv[1] + f".{info.rank}", "w") as f:
    json.dump(result, f)
D.cleanup_distributed()
"""


def sync_bn_stats(tmp_path: Path, device: str, mode: str) -> list[dict]:
    """Run SYNC_BN_SCRIPT on two ranks (torchrun): one train-mode forward of an 8-image batch split 4/4, and each
    rank's first-BN running statistics compared with plain BatchNorm over the whole batch and over its own half.
    ``mode`` "plain" keeps BatchNorm (the only form gloo on the CPU runs): each rank then matches its own half and is
    far from the whole batch, which is how the check was seen to tell synced from not without two GPUs (issue 47).
    Not a CPU test of its own: two torchrun ranks take ~10 s here."""
    import json

    script, out = tmp_path / "sync_bn.py", tmp_path / "stats.json"
    script.write_text(SYNC_BN_SCRIPT)
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(script), str(out), device, mode], capture_output=True, text=True, timeout=240,
                         env=PY_ENV, cwd=REPO)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return [json.loads(Path(f"{out}.{r}").read_text(encoding="utf-8")) for r in (0, 1)]


@cuda
@needs_two_gpus
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ddp_nccl_syncbn_across_two_gpus_uses_the_whole_batch_statistics(tmp_path):
    """SyncBatchNorm across two ranks on NCCL: each rank's running statistics are those of the whole 8-image batch,
    not of its own 4 (the two halves differ by +3, so a rank that did not sync is far off)."""
    for r in sync_bn_stats(tmp_path, "cuda", "sync"):
        assert r["layer"] == "SyncBatchNorm", r
        assert r["vs_whole"] <= 1e-4 * r["scale"] and r["vs_alone"] > 1e-2 * r["scale"], r


# ----------------------------------------------------------------------------- model parallel
@cuda
@needs_cuda
@pytest.mark.parametrize("cnn,seq", [("cuda", "cpu"), ("cpu", "cuda")])
def test_model_parallel_across_cuda_and_cpu_matches_one_device(cnn, seq):
    """place(): the features really hop between devices, forward and backward, with the one-device results."""
    from crnn.model import build_model

    torch.manual_seed(0)
    model = build_model("vgg_small", 1, 37).train()
    x = torch.randn(4, 1, 32, 100)
    ref = model(x)  # (B, T, K) on the CPU
    ref.square().mean().backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.place(cnn, seq)
    assert next(model.cnn.parameters()).device.type == cnn and model.head.weight.device.type == seq
    out = model(x.to(cnn))
    assert out.device.type == seq
    out.square().mean().backward()
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-3, atol=1e-4)
    assert rel_diff({n: p.grad.cpu() for n, p in model.named_parameters()}, ref_grads) < 1e-3


@cuda
@needs_cuda
def test_train_model_parallel_cnn_on_cuda_sequence_on_cpu(tmp_path, words_lmdb, caplog):
    from crnn.cli.train import main as train_main

    caplog.set_level("INFO", logger="crnn")
    out = tmp_path / "run"
    assert train_main(train_cli(out, words_lmdb, "train.steps=2", "train.model_parallel=[cuda,cpu]",
                                "train.amp=off")) == 0
    assert "model parallel: CNN on cuda, sequence model on cpu" in caplog.text
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    assert ck["step"] == 2 and not any(k.startswith("module.") for k in ck["model"])


# ----------------------------------------------------------------------------- checkpoints across devices
@cuda
@needs_cuda
def test_checkpoint_from_cuda_resumes_on_cpu_and_back(tmp_path, words_lmdb):
    from crnn.cli.train import main as train_main
    from crnn.engine.checkpoint import load_checkpoint

    out = tmp_path / "run"
    assert train_main(train_cli(out, words_lmdb, "train.steps=2", "train.device=cuda", "train.amp=off")) == 0
    ck = torch.load(out / "last.pt", map_location="cpu", weights_only=True)
    tensors = [v for v in ck["model"].values()] + [
        v for s in ck["optimizer"]["state"].values() for v in s.values() if torch.is_tensor(v)]
    assert tensors and all(v.device.type == "cpu" for v in tensors)
    assert load_checkpoint(out / "last.pt").model_state.keys() == ck["model"].keys()
    assert train_main(train_cli(out, words_lmdb, "train.steps=4", "train.device=cpu", "train.amp=off",
                                "train.resume=auto")) == 0
    assert torch.load(out / "last.pt", map_location="cpu", weights_only=True)["step"] == 4
    assert train_main(train_cli(out, words_lmdb, "train.steps=6", "train.device=cuda", "train.amp=off",
                                "train.resume=auto")) == 0
    assert torch.load(out / "last.pt", map_location="cpu", weights_only=True)["step"] == 6


# ----------------------------------------------------------------------------- inference and export
@cuda
@needs_cuda
def test_recognizer_on_cuda_reads_what_the_cpu_reads(tmp_path):
    paths = sample_images(tmp_path)
    cpu = read_texts("cpu", paths)
    assert read_texts("cuda", paths) == cpu and any(cpu)


@cuda
@needs_cuda
def test_greedy_decoding_on_cuda_reads_and_scores_as_on_the_cpu():
    """Greedy decoding of CUDA logits (its confidence: one ctc_loss on the logits' device) equals the CPU's, padded
    samples and a sample of no steps included, at a Chinese line's size."""
    from crnn.charset import Charset
    from crnn.decode import greedy_decode

    torch.manual_seed(0)
    cs = Charset("".join(chr(0x4E00 + i) for i in range(5000)))
    paths = torch.randint(0, cs.num_classes, (6, 40))
    logits = torch.randn(6, 40, cs.num_classes)
    logits.scatter_(2, paths[..., None], 9.0)
    lengths = torch.tensor([40, 40, 31, 12, 1, 0])
    cpu = greedy_decode(logits, cs, lengths)
    gpu = greedy_decode(logits.cuda(), cs, lengths.cuda())
    assert [t for t, _ in gpu] == [t for t, _ in cpu] and cpu[-1] == ("", 1.0)
    for (_, cg), (_, cc) in zip(gpu, cpu):
        assert cg == pytest.approx(cc, rel=1e-4)


@cuda
@needs_cuda
def test_crnn_predict_on_cuda_prints_what_the_cpu_prints(tmp_path, capsys):
    from crnn.cli.predict import main as predict_main

    paths = [str(p) for p in sample_images(tmp_path)]
    assert predict_main([*paths, "--device", "cpu", "--format", "json"]) == 0
    cpu = capsys.readouterr().out
    assert predict_main([*paths, "--device", "cuda", "--format", "json"]) == 0
    gpu = capsys.readouterr().out
    texts = lambda s: re.findall(r'"text":\s*"([^"]*)"', s)  # noqa: E731
    assert texts(gpu) == texts(cpu) and len(texts(cpu)) == len(paths)


@cuda
@needs_cuda
def test_onnx_export_of_a_cuda_trained_model(tmp_path, words_lmdb, capsys):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from crnn.cli.export import main as export_main
    from crnn.cli.train import main as train_main

    out = tmp_path / "run"
    assert train_main(train_cli(out, words_lmdb, "train.steps=2", "train.device=cuda", "train.amp=bf16")) == 0
    onnx_path = tmp_path / "m.onnx"
    assert export_main(["--weights", str(out / "last.pt"), "--format", "onnx", "--out", str(onnx_path)]) == 0
    assert onnx_path.is_file() and "checked with onnxruntime" in capsys.readouterr().out


# ----------------------------------------------------------------------------- cudnn.benchmark and keep-ratio
@cuda
@needs_cuda
@pytest.mark.parametrize("keep_ratio,expected", [(False, True), (True, False)])
def test_training_sets_cudnn_benchmark_from_the_batch_shapes(tmp_path, words_lmdb, caplog, keep_ratio, expected):
    from crnn.cli.train import main as train_main

    caplog.set_level("INFO", logger="crnn")
    torch.backends.cudnn.benchmark = not expected
    assert train_main(train_cli(tmp_path / "run", words_lmdb, "train.steps=3", "train.device=cuda",
                                "train.amp=off", f"data.keep_ratio={str(keep_ratio).lower()}")) == 0
    assert torch.backends.cudnn.benchmark is expected
    assert f"cudnn.benchmark={expected}" in caplog.text
