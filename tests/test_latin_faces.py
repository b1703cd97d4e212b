"""The Latin web faces (crnn/data/latin_faces.tsv): the manifest, held out by designer, what the generator draws from
them, the fetcher's conversion and the probe cache. Nothing here needs the network or the font cache."""
from __future__ import annotations

import functools
import importlib.util
import io
import os
import random
import re
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from PIL import ImageFont

from crnn.data import faces as FA
from crnn.data import fonts as F
from crnn.data import latin_faces as L
from crnn.data import probe_cache as PC

REPO = Path(__file__).resolve().parent.parent
DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


pytestmark = pytest.mark.usefixtures("own_font_cache")  # tests/conftest.py: a font cache of its own


def _dejavu() -> str:
    if not os.path.isfile(DEJAVU):
        pytest.skip("needs the DejaVu fonts (scripts/setup.sh installs fonts-dejavu-core)")
    return DEJAVU


@functools.lru_cache(maxsize=2)
def _small(flavor: str | None = None) -> bytes:
    """DejaVu Sans cut to printable ASCII (a tiny font, quick to write and to compress), as ``flavor`` (woff2)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(_dejavu())
    sub = subset.Subsetter()
    sub.populate(text=F.PRINTABLE + " ")
    sub.subset(font)
    font.flavor = flavor
    buf = io.BytesIO()
    font.save(buf)
    return buf.getvalue()


def _face_file(path: Path, family: str, variant: str = "400-normal") -> str:
    """DejaVu Sans (printable ASCII) renamed ``family`` at ``path``: a distinct face to find_fonts."""
    L.webfont_to_ttf(_small(), str(path), family, variant)
    return str(path)


# ---- the manifest


def test_the_manifest_reads_with_its_columns_roles_and_categories():
    rows = L.load_latin_manifest()
    header = next(ln for ln in Path(L.LATIN_MANIFEST).read_text(encoding="utf-8").splitlines()
                  if not ln.startswith("#"))
    assert tuple(header.split("\t")) == L.LATIN_COLUMNS
    assert {r.role for r in rows} == set(L.LATIN_ROLES)
    assert {r.category for r in rows} == set(L.CATEGORIES)
    families = {r.package for r in rows}
    assert 400 <= len(families) <= 800, len(families)
    for r in rows:
        assert r.file == L.face_file(r.package, r.variant) and r.source == L.face_source(r.package, r.variant)
        assert r.package.startswith("@fontsource/") and r.version and r.family and r.designer and r.licence
        assert r.variant in L.VARIANTS


def test_every_family_appears_once_per_file_with_its_regular_face():
    rows = L.load_latin_manifest()
    assert len({r.file.lower() for r in rows}) == len(rows), "one row per file"
    assert len({(r.package, r.variant) for r in rows}) == len(rows)
    by_pkg: dict[str, set] = {}
    for r in rows:
        by_pkg.setdefault(r.package, set()).add((r.family, r.role, r.category, r.version, r.designer))
    assert all(len(v) == 1 for v in by_pkg.values()), "a family's files agree on family, role, category, designer"
    assert len({next(iter(v))[0].lower() for v in by_pkg.values()}) == len(by_pkg), "one package per family"
    assert {r.package for r in rows if r.variant == "400-normal"} == set(by_pkg)
    # no file name of the CJK manifest, and no CJK family
    cjk = FA.load_manifest()
    assert not {r.file.lower() for r in rows} & {f.file.lower() for f in cjk}
    assert not {r.family.lower() for r in rows} & {f.family.lower() for f in cjk}


def _names(text: str) -> set[str]:
    """Who a designer / parent / family field names, lower case: each holder's name without its contact, each
    contact (e-mail, web domain, GitHub owner), each name's words of 5+ letters."""
    out = set()
    for holder in text.split(";"):
        contact = " ".join(a or b for a, b in re.findall(r"\((.*?)\)|<(.*?)>", holder))
        name = re.sub(r"\(.*?\)|<.*?>", "", holder).strip().lower()
        if name and not re.match(r"the .* authors?$", name) and name != "unknown":
            out.add(name)
            out |= {w for w in re.findall(r"[a-z]{5,}", name)
                    if w not in {"authors", "project", "fonts", "foundry", "international"}}
        for c in re.findall(r"[\w.+-]+@[\w.-]+|github\.com/[\w-]+|[\w-]+\.(?:com|org|net|de|cl|ar|at)\b",
                            contact.lower()):
            if c.startswith("github.com/"):
                c = c.split("/")[1]
            elif "@" in c and not c.endswith(("gmail.com", "yahoo.com", "hotmail.com")):
                c = c.split("@")[1]
            if c not in {"googlefonts", "google", "gmail.com"}:
                out.add(c.split(".")[0] if "@" not in c else c)
    return out


def test_no_held_out_family_designer_or_parent_is_a_training_one():
    rows = L.load_latin_manifest()
    train = [r for r in rows if r.role == "train"]
    held = {r.package: r for r in rows if r.role == "heldout"}.values()
    train_families = {r.family.lower() for r in train} | {r.parent.lower() for r in train if r.parent}
    train_names = set().union(*(_names(r.designer) for r in train))
    train_stems = {r.family.split()[0].lower() for r in train}
    train_stems |= {r.parent.split()[0].lower() for r in train if r.parent}
    for r in held:
        assert r.family.lower() not in train_families, r.family
        assert r.family.split()[0].lower() not in train_stems, f"{r.family}: a sibling trains"
        assert not (r.parent and r.parent.split()[0].lower() in train_stems), f"{r.family}: its parent trains"
        shared = _names(r.designer) & train_names
        assert not shared, f"{r.family}: designer {r.designer!r} shares {shared} with a training face"


def test_about_five_percent_of_the_families_of_every_category_are_held_out():
    first = [r for r in L.load_latin_manifest() if r.variant == "400-normal"]
    held = [r for r in first if r.role == "heldout"]
    assert 0.03 <= len(held) / len(first) <= 0.08
    assert {r.category for r in held} == set(L.CATEGORIES)


def test_no_latin_face_shares_a_designer_with_a_cjk_yardstick_face():
    """The CJK faces held out by design (dev / final) keep their designers out of the Latin training faces too."""
    cjk_names = set()
    for f in FA.load_manifest():
        if f.role in ("dev", "final"):
            cjk_names |= {n.strip().lower() for n in re.split(r"[,;/()]| and ", f.designer) if len(n.strip()) >= 4}
    for r in L.load_latin_manifest():
        text = f"{r.designer} {r.family}".lower()
        assert not [n for n in cjk_names if n in text], r.family


def test_the_held_out_families_are_whole_groups_of_the_manifest_script():
    """The script's grouping (shared holder, contact or first word of the name) never splits a group between the
    roles: a designer is held out whole."""
    spec = importlib.util.spec_from_file_location("latin_faces_script", REPO / "scripts" / "latin_faces.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = L.load_latin_manifest()
    role = {r.package: r.role for r in rows}
    for group in script.groups(list(rows)):
        assert len({role[p] for p in group}) == 1, sorted(group)
    assert script.designer("Copyright (c) 2011, Cyreal (www.cyreal.org a@cyreal.org), with Reserved Font Name "
                           '"Iceberg".') == "Cyreal (www.cyreal.org a@cyreal.org)"
    keys = script.designer_keys("The Alata Project Authors (https://github.com/SorkinType/Alata)", "Alata")
    assert keys & script.designer_keys("Sorkin Type Co (www.sorkintype.com eben@eyebytes.com)", "Basic")


def test_latin_roles_reach_face_role_by_file_name():
    rows = L.load_latin_manifest()
    for r in rows[:: max(1, len(rows) // 50)]:
        assert FA.face_role(f"/x/{r.file.upper()}") == r.role
        assert F.is_heldout_font(f"/y/{r.file}") == (r.role == "heldout")
        assert L.latin_face(f"/z/{r.file}") == r and F.draw_group(f"/z/{r.file}") == r.package
    assert L.latin_face("/z/DejaVuSans.ttf") is None and F.draw_group("/z/DejaVuSans.ttf") == "/z"


# ---- what the generator draws


def _one(role: str, category: str | None = None) -> L.LatinFace:
    return next(r for r in L.load_latin_manifest()
                if r.role == role and r.variant == "400-normal" and category in (None, r.category))


def test_find_fonts_takes_training_latin_faces_and_keeps_held_out_ones_for_split_heldout(tmp_path):
    d = tmp_path / "fonts"
    (d / "latin").mkdir(parents=True)
    train, held = _one("train"), _one("heldout")
    _face_file(d / "latin" / train.file, train.family)
    _face_file(d / "latin" / held.file, held.family)
    shutil.copy(_dejavu(), d / "DejaVuSans.ttf")
    names = lambda split: sorted(os.path.basename(p) for p in F.find_fonts(str(d), split))  # noqa: E731
    assert names("train") == sorted(["DejaVuSans.ttf", train.file])
    # held-out Latin faces are here: split heldout draws its Latin in them alone
    assert names("heldout") == [held.file]
    assert names("dev") == names("final") == sorted(["DejaVuSans.ttf", train.file])
    assert names("all") == sorted(["DejaVuSans.ttf", train.file, held.file])
    # without one, split heldout keeps the training Latin faces for Latin text (as before there were any)
    os.remove(d / "latin" / held.file)
    assert names("heldout") == sorted(["DejaVuSans.ttf", train.file])


def test_draws_are_balanced_by_family_between_web_and_system_faces(tmp_path):
    """A system folder of 2 families in 16 files weighs sqrt(16) = 4, 2 per family; each web family weighs those 2
    whatever its files (a handwriting family 0.3 of it), so 4 web families (one with 3 files, one handwriting) get
    6.6 / 10.6 of the draws - not 19 / 35 as by file, nor sqrt(3) for the family of three as by folder."""
    sysdir, web = tmp_path / "system", tmp_path / "cache" / "latin"
    sysdir.mkdir()
    web.mkdir(parents=True)
    fonts = [_face_file(sysdir / f"Sys{k}-{n}.ttf", f"System Family {k}", L.VARIANTS[n % 3])
             for k in range(2) for n in range(8)]
    full = Counter(r.package for r in L.load_latin_manifest() if r.role == "train")
    three = next(r for r in L.load_latin_manifest() if full[r.package] == 3 and r.category == "sans-serif")
    rows = [_one("train", "serif"), _one("train", "display"), _one("train", "handwriting")]
    fonts += [_face_file(web / L.face_file(three.package, v), three.family, v) for v in L.VARIANTS]
    fonts += [_face_file(web / r.file, r.family) for r in rows]
    picker = F.FontPicker(fonts)
    assert picker.family_weight == pytest.approx(2.0)
    weights = dict(zip((F.draw_group(g[0]) for g in picker.groups), picker.weights))
    assert weights == pytest.approx({str(sysdir): 4.0, three.package: 2.0, rows[0].package: 2.0,
                                     rows[1].package: 2.0, rows[2].package: 0.6})
    assert picker.shares()["web"] == pytest.approx(6.6 / 10.6)
    rng = random.Random(0)
    drawn = Counter(L.latin_face(picker.pick("Hello", rng).path) is not None for _ in range(3000))
    assert drawn[True] / 3000 == pytest.approx(6.6 / 10.6, abs=0.04)


def test_without_web_faces_the_folders_weigh_what_they_did(tmp_path):
    """No Latin web face: folders weigh sqrt(files) as before, so the same seed draws the same fonts."""
    d = tmp_path / "a"
    d.mkdir()
    (tmp_path / "b").mkdir()
    fonts = [_face_file(d / f"A{k}.ttf", f"A {k}") for k in range(4)] + [_face_file(tmp_path / "b" / "B.ttf", "B")]
    picker = F.FontPicker(fonts)
    assert picker.weights == [2.0, 1.0] and picker.shares()["web"] == 0.0


# ---- fetching


def _woff2(tmp_path: Path) -> bytes:
    """A woff2 as Fontsource ships them, made from an installed font."""
    return _small("woff2")


def test_a_woff2_becomes_a_truetype_file_pillow_loads_under_the_family_name(tmp_path):
    pytest.importorskip("brotli")
    out = tmp_path / "x-latin-700-normal.ttf"
    n = L.webfont_to_ttf(_woff2(tmp_path), str(out), "Some Family", "700-normal")
    assert n >= 94 and out.read_bytes()[:4] == b"\x00\x01\x00\x00" and not (tmp_path / f"{out.name}.tmp").exists()
    assert ImageFont.truetype(str(out), 20).getname() == ("Some Family", "Bold")
    info = F.font_info(str(out))
    assert info is not None and set(F.PRINTABLE) <= info.chars


def _tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(f"package/{name}")
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _row(pkg: str, variant: str, role: str = "train") -> L.LatinFace:
    return L.LatinFace(role, "serif", "npm: Fontsource", f"@fontsource/{pkg}", "5.0.0", L.face_file(pkg, variant),
                       pkg.title(), variant, "someone", "", "OFL-1.1", L.face_source(pkg, variant))


def test_the_fetcher_converts_skips_what_it_has_and_reports_each_failure(tmp_path, monkeypatch):
    pytest.importorskip("brotli")
    woff2 = _woff2(tmp_path)
    served = {"good": _tarball({"files/good-latin-400-normal.woff2": woff2, "files/good-latin-700-normal.woff2": woff2,
                                "files/good-latin-400-italic.woff2": woff2}),
              "thin": _tarball({"files/thin-latin-400-normal.woff2": woff2})}
    asked = []

    def download(url, tries=3, timeout=120):
        asked.append(url)
        pkg = url.rsplit("/", 1)[1].rsplit("-", 1)[0]
        if pkg not in served:
            raise FA.FaceError(f"{url}: HTTP 404 Not Found")
        return served[pkg]

    monkeypatch.setattr(L, "download", download)
    wanted = [_row("good", v) for v in L.VARIANTS] + [_row("thin", "400-normal"), _row("thin", "400-italic"),
                                                       _row("gone", "400-normal")]
    said = []
    done, problems = L.fetch_latin_faces(wanted, cache=str(tmp_path / "c"), jobs=2, every=2, say=said.append)
    assert sorted(os.path.basename(p) for p in done) == sorted(r.file for r in wanted[:3])
    assert len(problems) == 2
    assert any("@fontsource/thin@5.0.0" in p and "thin-latin-400-italic.woff2" in p for p in problems)
    assert any("@fontsource/gone" in p and "404" in p for p in problems)
    assert sum("FAILED" in s for s in said) == 2 and said[-1].startswith("latin faces: 3 of 6 file(s)")
    assert any(re.match(r"latin faces: \d/6 files", s) for s in said)
    assert sorted(os.listdir(tmp_path / "c" / "latin")) == sorted(os.path.basename(p) for p in done), "only the TTFs"
    asked.clear()
    done2, _ = L.fetch_latin_faces(wanted[:3], cache=str(tmp_path / "c"), say=said.append)
    assert done2 == done and asked == [], "present files are not fetched again"
    assert L.tarball_url("@fontsource/good", "5.0.0", "https://r.example/") == \
        "https://r.example/@fontsource/good/-/good-5.0.0.tgz"


def test_prune_removes_files_no_longer_in_the_manifest(tmp_path):
    folder = Path(L.latin_dir(str(tmp_path)))
    folder.mkdir(parents=True)
    for name in ("keep-latin-400-normal.ttf", "old-latin-400-normal.ttf", "x.ttf.tmp", "notes.txt"):
        (folder / name).write_bytes(b"")
    assert L.prune({"keep-latin-400-normal.ttf"}, str(tmp_path)) == ["old-latin-400-normal.ttf", "x.ttf.tmp"]
    assert sorted(os.listdir(folder)) == ["keep-latin-400-normal.ttf", "notes.txt"]


# ---- the probe cache


def test_the_probe_cache_is_used_and_a_stale_entry_is_probed_again(tmp_path):
    font = tmp_path / "f.ttf"
    shutil.copy(_dejavu(), font)
    PC.probe_cache.cache_clear()
    assert F.font_info(str(font)).family == "DejaVu Sans"
    store = PC.probe_cache(FA.font_cache_dir())
    store.save()
    assert os.path.isfile(store.path)
    # a fresh process reads the file: a record for the file as it is now is believed (no probe) ...
    PC.probe_cache.cache_clear()
    F.font_info.cache_clear()
    fresh = PC.probe_cache(FA.font_cache_dir())
    assert fresh.get(str(font))["family"] == "DejaVu Sans"
    fresh.entries[str(font)]["value"]["family"] = "Tampered"
    assert F.font_info(str(font)).family == "Tampered"
    # ... and once the file changes (size or time), it is probed again
    F.font_info.cache_clear()
    st = os.stat(font)
    os.utime(font, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert fresh.get(str(font)) is None
    assert F.font_info(str(font)).family == "DejaVu Sans"
    # a vanished file is dropped at the next save; a stale version of the file is ignored whole
    os.remove(font)
    fresh.save()
    PC.probe_cache.cache_clear()
    assert str(font) not in PC.probe_cache(FA.font_cache_dir()).entries
    Path(store.path).write_text('{"version": "0/old", "fonts": {"x": {}}}', encoding="utf-8")
    PC.probe_cache.cache_clear()
    assert PC.probe_cache(FA.font_cache_dir()).entries == {}
    PC.probe_cache.cache_clear()


def test_find_fonts_writes_the_probe_cache_once(tmp_path):
    d = tmp_path / "fonts"
    d.mkdir()
    shutil.copy(_dejavu(), d / "a.ttf")
    PC.probe_cache.cache_clear()
    F.find_fonts(str(d))
    path = Path(FA.font_cache_dir()) / PC.FILE_NAME
    assert str(d / "a.ttf") in path.read_text(encoding="utf-8")
    PC.probe_cache.cache_clear()


def test_han_picks_are_the_same_with_or_without_the_web_faces(tmp_path):
    """Web faces draw no Hanzi: a CJK line's face is drawn among the CJK faces, balanced by package, with the same
    random numbers whether hundreds of Latin families are there or not."""
    cjk = next((p for p in ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
                            "/usr/share/fonts/truetype/arphic/uming.ttc") if os.path.isfile(p)), None)
    if cjk is None:
        pytest.skip("needs a CJK font (scripts/setup.sh installs fonts-wqy-microhei)")
    web = tmp_path / "cache" / "latin"
    web.mkdir(parents=True)
    rows = [r for r in L.load_latin_manifest() if r.role == "train" and r.variant == "400-normal"][:6]
    base = [cjk, _face_file(tmp_path / "Plain.ttf", "Plain")]
    with_web = base + [_face_file(web / r.file, r.family) for r in rows]
    alphabet = "中文字体一二三"

    def picks(fonts):
        rng = random.Random(7)
        picker = F.FontPicker(fonts, alphabet)
        return [picker.pick(t, rng).path for t in ("中文", "字体", "一二三 ABC", "中 1") * 5]

    assert picks(with_web) == picks(base) and set(picks(base)) == {cjk}


def test_what_a_font_draws_of_an_alphabet_is_kept_too_and_probed_again_when_stale(tmp_path):
    font = tmp_path / "f.ttf"
    shutil.copy(_dejavu(), font)
    PC.probe_cache.cache_clear()
    F._drawn.cache_clear()
    alphabet = "abcÄé中"
    assert F.glyph_coverage(str(font), alphabet) >= set("Äé") and "中" not in F.glyph_coverage(str(font), alphabet)
    store = PC.probe_cache(FA.font_cache_dir())
    (drawn,) = store.get(str(font))["drawn"].values()
    assert drawn == "Äé"
    store.save()
    PC.probe_cache.cache_clear()
    F.font_info.cache_clear()
    F._drawn.cache_clear()
    fresh = PC.probe_cache(FA.font_cache_dir())
    (key,) = fresh.get(str(font))["drawn"]
    fresh.get(str(font))["drawn"][key] = "Ä"  # believed while the file is unchanged
    assert "é" not in F.glyph_coverage(str(font), alphabet)
    st = os.stat(font)
    os.utime(font, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    F.font_info.cache_clear()
    assert "é" in F.glyph_coverage(str(font), alphabet)
    PC.probe_cache.cache_clear()


def test_a_small_caps_face_draws_no_lower_case():
    """Go Smallcaps draws "positive" as POSITIVE: it counts as an all-caps face (upper-case text only), Go does not."""
    folder = next((r for r, _, fs in os.walk("/usr/share/fonts") if "Go-Smallcaps.ttf" in fs), None)
    if folder is None:
        pytest.skip("needs the Go fonts (scripts/setup.sh installs fonts-go)")
    small, plain = F.font_info(f"{folder}/Go-Smallcaps.ttf"), F.font_info(f"{folder}/Go-Regular.ttf")
    assert small.caps_only and not set("positive") & small.chars and set("POSITIVE") <= small.chars
    assert not plain.caps_only and set("positive") <= plain.chars
