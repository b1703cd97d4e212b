"""Which way imports run between the rooms (docs/development.md): the data room feeds the engine and never reaches
into it, and the trainer receives loaders from :mod:`crnn.data.feed` without touching how data is rendered."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO
from tests.test_imports import import_graph

RENDERING = ("data.synth", "data.online", "data.fonts", "data.font_cache", "data.faces", "data.latin_faces")


def room_violations(root: Path, package: str) -> list[str]:
    """``a imports b`` for every import that breaks the rooms' rules: a module under ``package``.data importing
    ``package``.engine (at the top or inside a function), or ``package``.engine.trainer importing the rendering code
    (synthetic text, the online stream, the font code)."""
    graph = import_graph(root, package)
    engine, rendering = f"{package}.engine", tuple(f"{package}.{m}" for m in RENDERING)
    found = [f"{m} imports {dep}" for m, deps in graph.items() if m == f"{package}.data" or
             m.startswith(f"{package}.data.") for dep in sorted(deps) if dep == engine or dep.startswith(engine + ".")]
    trainer = graph.get(f"{package}.engine.trainer", set())
    found += [f"{package}.engine.trainer imports {dep}" for dep in sorted(trainer)
              if any(dep == r or dep.startswith(r + ".") for r in rendering)]
    return found


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    for folder in (pkg, pkg / "data", pkg / "engine"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "data" / "feed.py").write_text("from pkg.data import synth\n\ndef build():\n    return synth\n")
    (pkg / "data" / "synth.py").write_text("X = 1\n")
    (pkg / "engine" / "runtime.py").write_text("X = 1\n")
    (pkg / "engine" / "trainer.py").write_text("from pkg.data.feed import build\nfrom pkg.engine import runtime\n")
    return pkg


def test_the_room_check_sees_each_violating_import(tmp_path):
    pkg = _package(tmp_path)
    assert room_violations(pkg, "pkg") == [], "engine -> data.feed is the right way round"
    (pkg / "data" / "feed.py").write_text("def build():\n    from ..engine.runtime import X\n    return X\n")
    (pkg / "engine" / "trainer.py").write_text("from pkg.data.feed import build\n\ndef fit():\n"
                                               "    from pkg.data.synth import X\n")
    assert room_violations(pkg, "pkg") == ["pkg.data.feed imports pkg.engine.runtime",
                                           "pkg.engine.trainer imports pkg.data.synth"]


def test_the_data_room_does_not_import_the_engine_and_the_trainer_does_not_render():
    found = room_violations(REPO / "crnn", "crnn")
    assert not found, "imports against the rooms (docs/development.md): " + "; ".join(found)
