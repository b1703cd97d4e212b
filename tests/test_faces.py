"""The CJK face manifest (crnn/data/cjk_faces.tsv): the honest yardstick's faces are held out by design, and
training never draws a held-out face."""
from __future__ import annotations

import glob
import os
import shutil

import pytest

from crnn.data import faces as FA
from crnn.data import fonts as F

YARDSTICK = ("dev", "final")


def _names(text: str) -> set[str]:
    """The names in a designer / parent / family field, lower case: "Liu Bingke, Yang Kang (ZCOOL)" -> liu bingke,
    yang kang, zcool; "AR PL ZenKai (from AR PL KaitiM Big5 / GB)" -> ar pl zenkai, ar pl kaitim big5, gb."""
    for sep in ",/();":
        text = text.replace(sep, "|")
    text = text.replace(" and ", "|").replace("from ", "|").replace(" project", "").replace(" authors", "")
    return {n.strip().lower() for n in text.split("|") if len(n.strip()) >= 3}


def _shared(mine: set[str], theirs: set[str]) -> set[str]:
    """Names of ``mine`` equal to one of ``theirs`` or contained in it as whole words (Arphic in Arphic Technology)."""
    return {m for m in mine for t in theirs if m == t or f" {m} " in f" {t} " or f" {t} " in f" {m} "}


def test_the_manifest_reads_and_every_role_is_known():
    rows = FA.load_manifest()
    assert {f.role for f in rows} == set(FA.ROLES)
    assert all(f.file and f.family and f.designer and f.parent and f.package for f in rows)
    assert len({f.file.lower() for f in rows}) == len(rows), "one row per file"


def test_the_yardstick_is_wide_enough():
    """At least 8 faces from at least 3 distributors, covering the styles the issue names; dev and final apart."""
    held = [f for f in FA.load_manifest() if f.role in YARDSTICK]
    assert len(held) >= 8
    assert len({f.distributor for f in held}) >= 3
    styles = " ".join(f.style for f in held)
    for style in ("condensed display", "title Song", "rounded Hei", "Kai", "brush"):
        assert style in styles, style
    assert {f.role for f in held} == set(YARDSTICK)
    assert all(f.npm and f.source for f in held), "every yardstick face says which npm slices make it"


@pytest.mark.parametrize("field", ["file", "family", "designer", "parent"])
def test_no_yardstick_face_shares_a_file_family_designer_or_parent_with_a_training_face(field):
    train = [f for f in FA.load_manifest() if f.role == "train"]
    for face in (f for f in FA.load_manifest() if f.role in YARDSTICK):
        if field in ("file", "family"):
            mine = getattr(face, field).lower()
            assert all(mine != getattr(t, field).lower() for t in train), (face.family, field)
            continue
        # a held-out face's designer and parent design name nobody and nothing among the training faces' designers,
        # parent designs or families (Ascender, Arphic, Source Han, Klee One ... would all be caught)
        theirs = set().union(*(_names(t.designer) | _names(t.parent) | _names(t.family) for t in train))
        shared = _shared(_names(getattr(face, field)), theirs)
        assert not shared, f"{face.family}: {field} {getattr(face, field)!r} shares {shared} with a training face"


def test_no_training_face_shares_a_designer_or_parent_with_lxgw_wenkai():
    """LXGW WenKai, a first-yardstick face (and @chinese-fonts/lxgwwenkai), is held out by design as well: no training
    face names LXGW, its parent Klee One or Klee One's foundry Fontworks (Tiejili, part Fontworks' Reggae One, stays
    out)."""
    rows = FA.load_manifest()
    theirs = set().union(*(_names(t.designer) | _names(t.parent) | _names(t.family) for t in rows if t.role == "train"))
    lxgw = [f for f in rows if f.family.startswith("LXGW WenKai")]
    assert lxgw
    for face in lxgw:
        mine = _names(face.designer) | _names(face.parent)
        assert {"lxgw", "klee one", "fontworks"} <= mine
        assert not _shared(mine, theirs), face.file
    assert _shared({"fontworks"}, {"reggae one by fontworks"}) == {"fontworks"}


def test_the_word_check_catches_a_sibling_of_a_training_face():
    """The check above can fail: AR PL SungtiL GB (the first yardstick's) shares Arphic with AR PL UMing."""
    train = [f for f in FA.load_manifest() if f.role == "train"]
    theirs = set().union(*(_names(t.designer) | _names(t.parent) for t in train))
    sungti = next(f for f in FA.load_manifest() if f.file == "gbsn00lp.ttf")
    assert _shared(_names(sungti.designer), theirs) == {"arphic technology"}
    assert _shared(_names(sungti.parent), theirs) == {"ar pl sungtil gb"}
    assert _shared({"arphic"}, theirs) == {"arphic"}


def test_every_face_that_is_not_a_training_face_is_held_out_by_file_name():
    for face in FA.load_manifest():
        assert F.is_heldout_font(f"/x/{face.file}") == (face.role != "train")
        assert FA.face_role(f"/y/{face.file.upper()}") == face.role
    assert FA.face_role("/z/SomeUserFont.ttf") == "train"


def _a_latin_font() -> str:
    found = sorted(glob.glob("/usr/share/fonts/**/DejaVuSans.ttf", recursive=True)) or sorted(
        glob.glob("/usr/share/fonts/**/*.ttf", recursive=True))
    if not found:
        pytest.skip("no .ttf font on this machine (scripts/setup.sh installs fonts-dejavu-core)")
    return found[0]


def test_training_never_draws_a_face_named_as_held_out(tmp_path):
    """A file named as a yardstick face is left out of the training split whatever it draws, and is the only face of
    its own split besides the Latin ones."""
    src = _a_latin_font()
    shutil.copy(src, tmp_path / "ZCOOLXiaoWei-merged.ttf")
    shutil.copy(src, tmp_path / "plain.ttf")
    F.font_info.cache_clear()
    names = lambda split: sorted(os.path.basename(p) for p in F.find_fonts(str(tmp_path), split))  # noqa: E731
    train, final = names("train"), names("final")
    assert "ZCOOLXiaoWei-merged.ttf" not in train and "plain.ttf" in train
    assert "ZCOOLXiaoWei-merged.ttf" in final
    assert "ZCOOLXiaoWei-merged.ttf" not in names("dev")


def test_no_training_font_on_this_machine_is_a_held_out_family():
    """Live: every CJK face the training split finds here (system folders and the web-font cache) has a family no
    held-out face has - a held-out design under another file name (LXGW WenKai from npm) would be caught."""
    held = {f.family.lower() for f in FA.load_manifest() if f.role != "train"}
    try:
        fonts = F.find_fonts(None, "train")
    except F.NoFontsError:
        pytest.skip("no fonts installed (scripts/setup.sh installs them)")
    cjk = [(p, F.font_info(p)) for p in fonts if F.font_info(p).cjk]
    if not cjk:
        pytest.skip("no CJK font installed (scripts/setup.sh installs them)")
    bad = [(p, i.family) for p, i in cjk if i.family.lower() in held]
    assert not bad


def test_bad_manifest_rows_are_refused_with_the_file(tmp_path):
    path = tmp_path / "faces.tsv"
    path.write_text("\t".join(FA.COLUMNS) + "\nsecret\tKai\tDebian\tpkg\t1\tf.ttf\tFam\tX\tY\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path}: bad row .*role one of train, heldout, dev, final"):
        FA.load_manifest(str(path))


def test_merging_web_font_slices_keeps_every_character(tmp_path):
    """Two subsets of one font (as npm web-font packages ship them) merge into a file that maps both halves."""
    subset = pytest.importorskip("fontTools.subset")
    from fontTools.ttLib import TTFont

    src = _a_latin_font()
    halves = []
    for k, text in enumerate(("abcdefghijklm", "nopqrstuvwxyz0123")):
        font = TTFont(src)
        sub = subset.Subsetter()
        sub.populate(text=text)
        sub.subset(font)
        halves.append(str(tmp_path / f"slice{k}.ttf"))
        font.save(halves[-1])
    out = str(tmp_path / "merged.ttf")
    n = FA.merge_slices(halves, out)
    cmap = TTFont(out).getBestCmap()
    assert {chr(c) for c in cmap} >= set("abcdefghijklmnopqrstuvwxyz0123") and n == len(cmap)
    assert not os.path.exists(out + ".tmp")


def _cff_slice(path: str, chars: str) -> None:
    """A font with PostScript (CFF) outlines mapping ``chars``, each drawn as one curved stroke."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.t2CharStringPen import T2CharStringPen

    names = [".notdef"] + [f"uni{ord(c):04X}" for c in chars]
    strings = {}
    for name in names:
        pen = T2CharStringPen(600, None)
        pen.moveTo((100, 0))
        pen.lineTo((100, 600))
        pen.curveTo((200, 750), (400, 750), (500, 600))
        pen.lineTo((500, 0))
        pen.closePath()
        strings[name] = pen.getCharString()
    fb = FontBuilder(1000, isTTF=False)
    fb.setupGlyphOrder(names)
    fb.setupCharacterMap({ord(c): f"uni{ord(c):04X}" for c in chars})
    fb.setupCFF("Slice-Regular", {"FullName": "Slice"}, strings, {})
    fb.setupHorizontalMetrics({name: (600, 100) for name in names})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": "Slice", "styleName": "Regular"})
    fb.setupOS2()
    fb.setupPost()
    fb.save(path)


def test_slices_with_postscript_outlines_merge_into_a_truetype_file(tmp_path):
    """Some packages (@chinese-fonts/dymh, kksjt) ship CFF slices, which the merger cannot join: they are turned into
    TrueType outlines first, and the merged file draws every character of both."""
    pytest.importorskip("fontTools.fontBuilder")
    from fontTools.ttLib import TTFont
    from PIL import ImageFont

    halves = [str(tmp_path / "a.otf"), str(tmp_path / "b.otf")]
    _cff_slice(halves[0], "\u4e00\u4e8c")
    _cff_slice(halves[1], "\u4e09AB")
    out = str(tmp_path / "merged.ttf")
    assert FA.merge_slices(halves, out) == 5
    font = TTFont(out)
    assert "glyf" in font and "CFF " not in font
    drawn = ImageFont.truetype(out, 40)
    for ch in "\u4e00\u4e8c\u4e09AB":
        box = drawn.getmask(ch).getbbox()
        assert box is not None and box[2] - box[0] > 10, ch


def test_fetching_without_npm_says_how_to_get_it(tmp_path, monkeypatch):
    face = next(f for f in FA.load_manifest() if f.role == "final")
    monkeypatch.setattr(FA.shutil, "which", lambda name: None)
    with pytest.raises(FA.FaceError, match="npm is missing \\(apt-get install npm\\)"):
        FA.fetch_webfont(face, cache=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_setup_installs_every_debian_face_of_the_manifest():
    """scripts/setup.sh installs font_packages.txt's cjk sections: they hold exactly the manifest's Debian faces."""
    debian = lambda role: {f.package for f in FA.load_manifest() if f.role == role and not f.npm}  # noqa: E731
    assert debian("train") == set(F.font_packages("cjk"))
    assert debian("heldout") == set(F.font_packages("cjk-heldout"))


def test_a_traditional_only_face_is_a_cjk_face_not_a_latin_one():
    """Big5 faces (cwTeX, AR PL Mingti2L Big5) lack the simplified 国: they still count as CJK, so their Latin glyphs
    never join the faces of English words."""
    found = [p for p in ("/usr/share/fonts/truetype/cwtex/cwming.ttf",
                         "/usr/share/fonts/truetype/arphic-bsmi00lp/bsmi00lp.ttf") if os.path.isfile(p)]
    if not found:
        pytest.skip("needs fonts-cwtex-ming or fonts-arphic-bsmi00lp (scripts/setup.sh installs them)")
    for path in found:
        info = F.font_info(path)
        assert info is not None and info.cjk, path
