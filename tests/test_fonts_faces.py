"""Which faces a run renders from (crnn.data.fonts.describe_faces, faces_stamp): the log line's counts per face
manifest, the warning naming the fetch command where a manifest's training faces are missing, and the stamp
lever_probe.sh keeps per arm, which changes with the list of faces."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from crnn.data import fonts as F
from crnn.data.faces import faces
from crnn.data.latin_faces import load_latin_manifest

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LATIN_TRAIN = [f for f in load_latin_manifest() if f.role == "train"]
CJK_TRAIN = faces("train")


pytestmark = pytest.mark.usefixtures("own_font_cache")  # tests/conftest.py: a font cache of its own


def _cache(*names: str) -> list[str]:
    """Paths of files named ``names`` in the font cache (Latin web faces in its latin/ folder); nothing is written."""
    latin = {f.file for f in LATIN_TRAIN}
    return [os.path.join(F.font_cache_dir(), "latin" if n in latin else "", n) for n in names]


def test_an_english_run_without_the_latin_web_faces_counts_none_and_names_the_fetch_command():
    fonts = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/x/Other.ttf"]
    line, warnings = F.describe_faces(fonts, "0123456789abcdefghijklmnopqrstuvwxyz")
    n = len(LATIN_TRAIN)
    assert line == (f"faces: 2 font files from the system font folders and the web-font cache ({F.font_cache_dir()}); "
                    f"Latin web faces: 0 of the {n} training files of crnn/data/latin_faces.tsv")
    assert warnings == [f"faces: none of the {n} training files of crnn/data/latin_faces.tsv (Latin web faces) is "
                        "here, so the text is drawn without them; to train as the recipe says, fetch them: "
                        "python scripts/latin_faces.py --fetch"]  # no word on the CJK faces: no Han to draw


def test_a_digits_run_is_drawn_in_the_latin_web_faces_too_and_is_told_when_they_are_missing():
    """ASCII-only text (digits alone too) is drawn in the Latin web faces: a digits model without them trains on
    other faces than one with them."""
    line, warnings = F.describe_faces([DEJAVU], "0123456789")
    assert line.endswith(f"; Latin web faces: 0 of the {len(LATIN_TRAIN)} training files of crnn/data/latin_faces.tsv")
    assert len(warnings) == 1 and warnings[0].endswith("python scripts/latin_faces.py --fetch")


def test_the_counts_follow_the_faces_found_and_all_of_them_warn_of_nothing():
    some = _cache(*(f.file for f in LATIN_TRAIN[:3]))
    line, warnings = F.describe_faces(["/usr/share/fonts/a.ttf", *some], "abc")
    assert line.endswith(f"Latin web faces: 3 of the {len(LATIN_TRAIN)} training files of crnn/data/latin_faces.tsv")
    assert warnings[0].startswith(f"faces: {len(LATIN_TRAIN) - 3} of the {len(LATIN_TRAIN)} training files of "
                                  "crnn/data/latin_faces.tsv (Latin web faces) are not here")
    held = [f.file for f in load_latin_manifest() if f.role != "train"][:1]
    line, warnings = F.describe_faces(_cache(*(f.file for f in LATIN_TRAIN), *held), "abc")
    assert warnings == [] and f"{len(LATIN_TRAIN)} of the {len(LATIN_TRAIN)} training files" in line


def test_a_chinese_alphabet_counts_the_cjk_faces_too_and_names_how_each_missing_one_comes():
    """npm faces come with scripts/face_manifest.py --fetch, Debian ones with apt-get; a face the generator refuses
    by its name (a hairline weight, a rare-Han supplement) is never drawn, so it is not missing."""
    debian = [f for f in CJK_TRAIN if not f.npm]
    refused = [f for f in CJK_TRAIN if F._excluded(f.file, "", "")]
    here = [f.file for f in CJK_TRAIN if f.npm and f not in refused]
    counts = F.manifest_counts(_cache(*here), "中文abc")
    assert [c.name for c in counts] == ["CJK faces", "Latin web faces"]
    cjk = counts[0]
    assert (cjk.manifest, cjk.found, cjk.refused) == ("crnn/data/cjk_faces.tsv", len(here), len(refused))
    assert cjk.listed == len(CJK_TRAIN) - len(refused)
    wanted = sorted({f.package for f in debian if f not in refused})
    assert cjk.fetch == "apt-get install " + " ".join(wanted)
    line, warnings = F.describe_faces(_cache(*here[1:]), "中文")  # no ASCII letter: no word on the Latin faces
    assert "Latin" not in line and len(warnings) == 1
    assert warnings[0].endswith("python scripts/face_manifest.py --fetch and apt-get install " + " ".join(wanted))


def test_a_face_the_probe_refused_here_is_not_missing(tmp_path):
    from crnn.data.probe_cache import probe_cache

    face = LATIN_TRAIN[0]
    path = Path(_cache(face.file)[0])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a font")
    probe_cache(F.font_cache_dir()).put(str(path), {"family": "x", "style": "y", "ok": False})
    (c,) = F.manifest_counts([], "abc")
    assert (c.found, c.listed, c.refused) == (0, len(LATIN_TRAIN) - 1, 1)


def test_the_users_own_folder_is_named_and_no_manifest_is_counted(tmp_path):
    assert F.describe_faces(["/f/a.ttf"], "中abc", fonts_dir="/f") == ("faces: 1 font file from /f", [])


def test_the_stamp_counts_each_source_and_changes_with_the_list_of_faces(monkeypatch, tmp_path):
    cache = F.font_cache_dir()
    found = ["/usr/share/fonts/a.ttf", f"{cache}/Cjk-merged.ttf", *_cache(LATIN_TRAIN[0].file, LATIN_TRAIN[1].file)]
    monkeypatch.setattr(F, "find_fonts", lambda fonts_dir=None, split="all": sorted(found))
    stamp = F.faces_stamp()
    assert stamp.startswith("faces 4 files (system 1, web 1, web-latin 2), names ") and len(stamp.split()[-1]) == 16
    found.append(_cache(LATIN_TRAIN[2].file)[0])
    five = F.faces_stamp()
    assert five.startswith("faces 5 files (system 1, web 1, web-latin 3), names ")
    found[-1] = _cache(LATIN_TRAIN[3].file)[0]  # as many files from each source, another face
    other = F.faces_stamp()
    assert other.split()[:-1] == five.split()[:-1] and other != five
    found[-1] = f"{cache}/latin/sub/{os.path.basename(found[-1])}"  # the same file names: the same names hash
    assert F.faces_stamp() == other

    def none(fonts_dir=None, split="all"):
        raise F.NoFontsError("no fonts")

    monkeypatch.setattr(F, "find_fonts", none)
    assert F.faces_stamp() == "faces none"


def test_the_stamp_of_a_real_folder_finds_its_fonts(tmp_path):
    if not os.path.isfile(DEJAVU):
        pytest.skip("needs the DejaVu fonts (scripts/setup.sh installs fonts-dejavu-core)")
    d = tmp_path / "mine"
    d.mkdir()
    shutil.copy(DEJAVU, d / "DejaVuSans.ttf")
    assert F.faces_stamp(str(d)).startswith("faces 1 files (folder 1), names ")
    assert F.faces_stamp(str(tmp_path / "absent")) == "faces none"
