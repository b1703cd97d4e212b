"""Chinese end to end: train on a Sierkinhane-style GB18030 alphabet with a 'blank' first line, evaluate honestly."""
from __future__ import annotations

import json

import torch

from crnn.cli.evaluate import main as eval_main
from crnn.cli.train import main as train_main
from tests.conftest import make_lmdb

ALPHABET = "中文识别模型训练数据集一二三"
LABELS = ["中文识别", "模型训练", "数据集", "一二三", "识别模型", "训练数据", "中文", "集"]


def test_train_with_gb18030_blank_alphabet_then_evaluate(tmp_path, capfd):
    alphabet = tmp_path / "char_std_5990.txt"
    alphabet.write_bytes(("blank\r\n" + "".join(c + "\r\n" for c in ALPHABET)).encode("gb18030"))
    train = make_lmdb(tmp_path / "zh_train.lmdb", LABELS * 2)
    val = make_lmdb(tmp_path / "zh_val.lmdb", LABELS)
    run = tmp_path / "run"
    rc = train_main(["--config", "configs/smoke.yaml", f"model.charset={alphabet}", f"data.train=[{{path: {train}}}]",
                     f"data.val=[{val}]", f"train.output_dir={run}", "data.batch_size=8", "train.steps=3",
                     "train.val_every=3", "train.save_every=3", "train.log_every=1", "train.warmup_steps=0",
                     "train.tensorboard=false", "train.show_predictions=2"])
    err = capfd.readouterr().err
    assert rc == 0, err
    assert "first line 'blank' is the CTC blank placeholder; skipped (14 characters)" in err
    assert "metric protocol: exact (auto: the charset is not alnum36)" in err
    assert "val " in err and " CER " in err.split("val ", 1)[1].split("\n")[0]
    ck = torch.load(run / "last.pt", map_location="cpu", weights_only=True)
    assert ck["step"] == 3 and ck["charset"]["chars"] == ALPHABET
    assert ck["model"]["head.weight"].shape[0] == len(ALPHABET) + 1
    assert eval_main(["--weights", str(run / "last.pt"), "--data", str(val), "--json", "--workers", "0"]) == 0
    s = json.loads(capfd.readouterr().out)
    assert (s["protocol"], s["cer_first"], s["num_classes"]) == ("exact", True, 15)
    assert s["overall"]["samples"] == len(LABELS) and s["overall"]["removed_share"] == 0.0
    assert s["overall"]["cer"] > 0.5 and s["overall"]["word_acc"] < 0.5  # 3 steps: nowhere near reading Chinese
