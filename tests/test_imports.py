"""The import graph of the crnn package: no cycles (top-level or deferred into a function), crnn/foreign layered
as common <- importers <- detection, and the command lines on top: nothing outside crnn/cli imports crnn.cli."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

FOREIGN_IMPORTERS = ("clovaai", "easyocr", "meijieru", "sierkinhane")


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file for every .py under ``root`` (the folder of ``package``)."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (``crnn.x.Y`` -> ``crnn.x``)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports anywhere in its file (inside functions too), ancestors excluded.

    ``import crnn`` inside ``crnn.infer`` is left out: a module's parent packages are imported before it anyway.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        found.update(m for m in (_known(n, mods) for n in names) if m is not None)
    return {m for m in found if m != module and not module.startswith(m + ".")}


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    mods = module_files(root, package)
    return {m: imported_modules(m, p, mods) for m, p in mods.items()}


def named_imports(path: Path) -> set[str]:
    """The module names in ``importlib.import_module("...")`` and ``__import__("...")`` calls of a file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def cli_importers(root: Path, package: str) -> dict[str, list[str]]:
    """Modules outside ``package``.cli that import it or a module under it (at the top, in a function, or by name
    through importlib), each with what it imports: the library must not depend on its command lines."""
    cli = f"{package}.cli"
    is_cli = lambda name: name == cli or name.startswith(cli + ".")  # noqa: E731
    mods = module_files(root, package)
    found = {}
    for module, path in mods.items():
        if not is_cli(module):
            bad = {m for m in imported_modules(module, path, mods) | named_imports(path) if is_cli(m)}
            if bad:
                found[module] = sorted(bad)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as ``[a, b, ..., a]``, or ``[]`` when the graph has none (depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_the_cycle_finder_sees_a_cycle_made_of_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from pkg.sub.b import f\n")
    (pkg / "sub" / "b.py").write_text("import pkg\n\ndef f():\n    from . import c\n")
    (pkg / "sub" / "c.py").write_text("from .a import f  # noqa\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}  # `import pkg` (an ancestor) is no edge
    assert find_cycle(graph) == ["pkg.sub.a", "pkg.sub.b", "pkg.sub.c", "pkg.sub.a"]
    (pkg / "sub" / "c.py").write_text("X = 1\n")
    assert find_cycle(import_graph(pkg, "pkg")) == []


def test_the_crnn_package_has_no_import_cycle():
    cycle = find_cycle(import_graph(REPO / "crnn", "crnn"))
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_foreign_is_layered_common_then_importers_then_detection():
    graph = import_graph(REPO / "crnn", "crnn")
    foreign = {m for m in graph if m.startswith("crnn.foreign")}
    assert not graph["crnn.foreign.common"] & foreign, "common.py is the ground: it imports no crnn.foreign module"
    for name in FOREIGN_IMPORTERS:
        above = graph[f"crnn.foreign.{name}"] & {"crnn.foreign", "crnn.foreign.detect"}
        assert not above, f"the {name} importer reaches up to {sorted(above)}"


def test_the_cli_check_sees_library_modules_that_import_the_cli(tmp_path):
    pkg = tmp_path / "pkg"
    for folder in (pkg, pkg / "cli", pkg / "engine"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "cli" / "tool.py").write_text("from pkg.engine.work import run\nfrom . import other\n")
    (pkg / "cli" / "other.py").write_text("")
    (pkg / "engine" / "work.py").write_text("def run():\n    pass\n")
    assert cli_importers(pkg, "pkg") == {}, "cli -> library is the right way round"
    (pkg / "engine" / "work.py").write_text("def run():\n    from ..cli import tool\n")  # deferred, relative
    (pkg / "api.py").write_text("import importlib\nimportlib.import_module('pkg.cli.other')\n")
    (pkg / "engine" / "__init__.py").write_text("from pkg import cli\n")
    assert cli_importers(pkg, "pkg") == {"pkg.engine": ["pkg.cli"], "pkg.engine.work": ["pkg.cli.tool"],
                                         "pkg.api": ["pkg.cli.other"]}


def test_nothing_outside_crnn_cli_imports_crnn_cli():
    """The command lines parse arguments and call the library, never the reverse (issue 45): crnn.evaluate, the
    service and the CLIs stand side by side on crnn/engine, crnn/infer and the rest."""
    found = cli_importers(REPO / "crnn", "crnn")
    assert not found, "library modules that import crnn.cli (move the work they use into the library): " + \
        "; ".join(f"{m} imports {', '.join(deps)}" for m, deps in sorted(found.items()))
