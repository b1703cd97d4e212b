"""Write crnn/data/latin_faces.tsv (the Latin web faces: Fontsource families from npm) and fetch its faces.

    python scripts/latin_faces.py --fetch                  # the manifest's faces into the font cache's latin/ folder
    python scripts/latin_faces.py --counts                 # families and files per category and role (docs/data.md)
    python scripts/latin_faces.py --write --names FILE     # rewrite the manifest from the packages named in FILE
                                                           # (lines '@fontsource/<id>[<TAB>version]'); without
                                                           # --names, from the packages the manifest lists now

--write keeps a package when Google Fonts' metadata (the npm package google-font-metadata, pinned) gives it a
``latin`` subset, a regular (400 normal) face and no CJK subset, its name is no symbol, icon, emoji, barcode or
math face (crnn.data.fonts.EXCLUDE_RE), and it is neither a family the system fonts here already have nor a family
of crnn/data/cjk_faces.tsv. Each kept package is downloaded once; its own metadata.json gives the family, category,
licence and copyright holder, and the latin woff2 of the regular, bold (700) and italic (400) faces are converted
into the cache, where every file must load, draw all 94 printable ASCII characters with glyphs of its own
(crnn.data.fonts.font_info; an all-caps or small-caps face counts its capitals) and be the only file of its family
and style. Families are then joined when they share a copyright holder, a contact (web or e-mail domain, GitHub
owner), the first word of their name (Roboto, Roboto Slab, Roboto Mono) or a parent design (PARENTS, by hand); about
5 % of the families, whole groups of at most three, in every category, are held out (role ``heldout``): groups whose
every family names its designer and none of whose names appears among the system fonts' or the CJK faces', picked by
a hash of their package names, so the same inputs write the same manifest. The committed manifest was written from
the 622 ``@fontsource/`` packages (name and version) of the workplace's npm package list.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data import latin_faces as L  # noqa: E402
from crnn.data.faces import FaceError, font_cache_dir, load_manifest  # noqa: E402

# Google Fonts' families, subsets, weights and styles, as Fontsource reads them
GF_METADATA = "google-font-metadata@6.0.8"
CJK_SUBSETS = {"chinese-simplified", "chinese-traditional", "chinese-hongkong", "japanese", "korean"}
DISTRIBUTOR = "npm: Fontsource (Google Fonts files)"
HELDOUT_SHARE = 0.05
# Families whose Latin is another family's design, which their copyright line does not say (so a held-out face is no
# sibling of a training one): package -> parent family
PARENTS = {
    "@fontsource/vazirmatn": "Roboto",  # Vazirmatn's Latin is Roboto's
    "@fontsource/heebo": "Roboto",  # Roboto extended to Hebrew
    "@fontsource/yrsa": "Merriweather",  # Yrsa and Rasa: Rosetta's extension of Merriweather's Latin
    "@fontsource/rasa": "Merriweather",
    "@fontsource/readex-pro": "Lexend",  # Lexend extended to Arabic
    "@fontsource/assistant": "Source Sans",  # Source Sans extended to Hebrew
    "@fontsource/cairo": "Titillium Web",  # Titillium Web extended to Arabic
    "@fontsource/miriam-libre": "Libre Franklin",
    "@fontsource/noto-kufi-arabic": "Noto Sans",
}
# contacts that name a host of many designers' projects, not a designer
GENERIC_CONTACTS = {"googlefonts", "google", "googlei18n", "notofonts", "gmail.com", "github.com", "yahoo.com",
                    "hotmail.com", "fonts"}
# words of holders' names that say nothing about who they are
COMMON_WORDS = {"authors", "project", "foundry", "fonts", "typefaces", "typeface", "design", "designs", "studio",
                "company", "limited", "google", "corporation", "reserved", "rights", "licensed", "under", "version",
                "typography", "typographic", "types", "digital", "media", "labs", "international", "group"}
_FILE_NOTE = re.compile(r"\s+[\w.\[\],-]+\.(?:ttf|otf):\s.*$", re.S)  # "Foo-Italic.ttf: Copyright ..." repeats
_HOLDER = re.compile(r"^(?:copyright\s*)?(?:\(c\)|©)?\s*(?:[\d\s,\-–]+)?,?\s*(?:by\s+)?", re.I)
_TAIL = re.compile(r"[.,]?\s*(?:all rights reserved|with reserved font names?|reserved font name|available under"
                   r"|this font software).*$", re.I | re.S)


# ---- the candidates and their metadata


def read_names(path: str | None) -> list[tuple[str, str]]:
    """(package, version or '') per line of ``path`` (``#`` comments; a tab, if any, before the version), or the
    packages the manifest lists now."""
    if path is None:
        return sorted({(f.package, f.version) for f in L.load_latin_manifest()})
    out = []
    for ln in Path(path).read_text(encoding="utf-8").splitlines():
        parts = ln.split("\t")
        if ln.strip() and not ln.startswith("#") and parts[0].startswith("@fontsource/"):
            out.append((parts[0].strip(), parts[1].strip() if len(parts) > 1 else ""))
    return sorted(set(out))


def google_metadata(tmp: str) -> dict:
    """Google Fonts' metadata by Fontsource id, from the pinned google-font-metadata package (npm pack)."""
    subprocess.run(["npm", "pack", GF_METADATA, "--pack-destination", tmp, "--silent"], check=True,
                   capture_output=True, timeout=600)
    tgz = next(Path(tmp).glob("google-font-metadata-*.tgz"))
    data = L.tar_members(tgz.read_bytes(), ["data/google-fonts-v2.json"])["data/google-fonts-v2.json"]
    return json.loads(data)


def candidates(names: list[tuple[str, str]], gf: dict, say=print) -> list[tuple[str, str, dict]]:
    """The packages worth fetching: Google families with a latin subset, a regular face and no CJK subset, named
    as no symbol/icon face, not among the CJK faces."""
    from crnn.data.fonts import EXCLUDE_RE

    cjk = {f.package for f in load_manifest()} | {f.family.lower() for f in load_manifest()}
    out, why = [], Counter()
    for pkg, ver in names:
        meta = gf.get(pkg.split("/", 1)[1])
        if meta is None:
            why["not a Google family (no metadata)"] += 1
        elif "latin" not in meta["subsets"] or set(meta["subsets"]) & CJK_SUBSETS:
            why["no latin subset, or a CJK one"] += 1
        elif 400 not in meta["weights"] or "normal" not in meta["styles"]:
            why["no regular face"] += 1
        elif EXCLUDE_RE.search(pkg) or EXCLUDE_RE.search(meta["family"]):
            why["a symbol, icon, emoji or math face"] += 1
        elif pkg in cjk or meta["family"].lower() in cjk:
            why["a CJK manifest face"] += 1
        else:
            out.append((pkg, ver, meta))
    say(f"{len(out)} of {len(names)} packages are candidates; left out: "
        + ", ".join(f"{n} {w}" for w, n in sorted(why.items())))
    return out


def latest_version(pkg: str) -> str:
    """The version the registry calls latest (for a name given without one)."""
    url = L.tarball_url(pkg, "0").rsplit("/-/", 1)[0].replace(pkg, pkg.replace("/", "%2f")) + "/latest"
    return json.loads(L.download(url))["version"]


def designer(attribution: str) -> str:
    """The copyright holders of a package's licence attribution, with their contacts, ``; `` between them:
    "Copyright (c) 2011, Cyreal (www.cyreal.org a@cyreal.org), with Reserved Font Name ..." -> "Cyreal
    (www.cyreal.org a@cyreal.org)"."""
    text = _FILE_NOTE.sub("", " ".join(attribution.split()))
    holders = [_TAIL.sub("", _HOLDER.sub("", "Copyright" + part)).strip(" .,;")
               for part in re.split(r"(?i)\bcopyright\b", text) if part.strip()]
    holders = [re.sub(r",?\s*\d{4}(?:\s*-\s*\d{4})?$", "", h).replace("\t", " ") for h in holders]  # "..., 2011"
    return "; ".join(dict.fromkeys(h for h in holders if h)) or "unknown"


def designer_keys(designer_: str, family: str, parent: str = "") -> set[str]:
    """What ties families to one designer, foundry or parent design: the holder's name (unless it is a project's
    own "The X Project Authors"), each contact's domain, e-mail or GitHub owner, and the first word of the family's
    name and of its parent's."""
    keys = {"family:" + name.split()[0].lower() for name in (family, parent) if name.strip()}
    for holder in designer_.split("; "):
        name = re.sub(r"[^a-z0-9]+", " ", re.sub(r"\(.*?\)", "", holder).lower()).strip()
        if name and name != "unknown" and not re.match(r"the .* authors?$", name):
            keys.add("name:" + name)
            # and each distinctive word of it: "Astigmatic One Eye" and "Brian J. Bonislawsky DBA Astigmatic" meet
            keys |= {"word:" + w for w in name.split() if len(w) >= 5 and w not in COMMON_WORDS}
    for contact in re.findall(r"[\w.+-]+@[\w.-]+|(?:https?://)?(?:www\.)?[\w-]+(?:\.[\w-]+)+(?:/[\w.-]+)*",
                              designer_):
        contact = contact.lower().removeprefix("https://").removeprefix("http://").removeprefix("www.")
        if contact.startswith("github.com/"):
            owner = contact.split("/")[1] if contact.count("/") >= 1 else ""
            if owner and owner not in GENERIC_CONTACTS:
                keys.add("contact:" + owner)
        elif "@" in contact:
            domain = contact.split("@", 1)[1]
            keys.add("contact:" + (contact if domain in GENERIC_CONTACTS else _stem(domain)))
        elif contact.split("/")[0] not in GENERIC_CONTACTS:
            keys.add("contact:" + _stem(contact.split("/")[0]))
    return keys


def _stem(domain: str) -> str:
    """The name part of a web domain: sorkintype.com -> sorkintype, huertatipografica.com.ar -> huertatipografica
    (so it meets the GitHub owner SorkinType)."""
    labels = domain.split(".")
    while len(labels) > 1 and len(labels[-1]) <= 3:
        labels.pop()
    return labels[-1]


# ---- fetching and checking


def inspect(pkg: str, ver: str, gf_meta: dict, cache: str) -> tuple[list[L.LatinFace], str]:
    """The manifest rows of one package (role train), its files converted into the cache; and a problem or ''."""
    try:
        ver = ver or latest_version(pkg)
        variants = [v for v in L.VARIANTS if int(v[:3]) in gf_meta["weights"] and v[4:] in gf_meta["styles"]]
        rows = [L.LatinFace("train", "", DISTRIBUTOR, pkg, ver, L.face_file(pkg, v), gf_meta["family"], v, "",
                            PARENTS.get(pkg, ""), "", L.face_source(pkg, v)) for v in variants]
        folder = L.latin_dir(cache)
        os.makedirs(folder, exist_ok=True)
        need = [r for r in rows if not os.path.isfile(os.path.join(folder, r.file))]
        files = L.tar_members(L.download(L.tarball_url(pkg, ver)),
                              {"metadata.json", "LICENSE", *(r.source for r in need)})
        meta = json.loads(files["metadata.json"])
        family = meta.get("family", gf_meta["family"])
        for r in need:
            if r.source in files:
                L.webfont_to_ttf(files[r.source], os.path.join(folder, r.file), family, r.variant)
        lic = meta.get("license") or {}
        lic = {"type": lic} if isinstance(lic, str) else lic
        if not lic.get("attribution"):  # older metadata: the copyright lines of the package's LICENSE
            text = files.get("LICENSE", b"").decode("utf-8", "replace")
            lic["attribution"] = " ".join(ln for ln in text.splitlines() if ln.lower().startswith("copyright"))
        category = meta.get("category", gf_meta.get("category", ""))
        fields = dict(category=category, family=family,
                      designer=designer(lic.get("attribution", "")), licence=lic.get("type", "") or "unknown")
        return [dataclasses.replace(r, **fields) for r in rows if os.path.isfile(os.path.join(folder, r.file))], ""
    except (FaceError, OSError, KeyError, ValueError) as e:
        return [], f"{pkg}@{ver}: {type(e).__name__}: {' '.join(str(e).split())}"


def draws_ascii(path: str) -> bool:
    """The file loads and draws all 94 printable ASCII characters with glyphs of its own (an all-caps face's
    capitals count for its lower case)."""
    import string

    from crnn.data.fonts import PRINTABLE, font_info

    info = font_info(path)
    if info is None:
        return False
    chars = info.chars | (set(string.ascii_lowercase) if info.caps_only else set())
    return set(PRINTABLE) <= chars


def system_fonts() -> list[str]:
    """The system fonts the generator finds (no cache)."""
    from crnn.data.fonts import SYSTEM_FONT_DIRS, NoFontsError, find_fonts

    fonts = []
    for d in SYSTEM_FONT_DIRS:
        try:
            fonts += find_fonts(os.path.expanduser(d)) if os.path.isdir(os.path.expanduser(d)) else []
        except NoFontsError:
            pass
    return fonts


def name_strings(paths: list[str]) -> str:
    """The copyright, family, manufacturer and designer names of font files, lower case, one per line."""
    from fontTools.ttLib import TTCollection, TTFont

    out = set()
    for p in paths:
        try:
            fonts = TTCollection(p).fonts if p.lower().endswith(".ttc") else [TTFont(p, lazy=True)]
        except Exception:  # noqa: BLE001 - an unreadable font names nobody
            continue
        for font in fonts:
            for rec in font["name"].names:
                if rec.nameID in (0, 1, 8, 9, 16):
                    try:
                        out.add(" ".join(rec.toUnicode().lower().split()))
                    except UnicodeDecodeError:
                        pass
    return "\n".join(sorted(out))


def check(rows: list[L.LatinFace], cache: str, say=print) -> list[L.LatinFace]:
    """The rows whose file draws printable ASCII and whose (family, style) no system font nor other file has; a
    family without its regular face is dropped whole."""
    from crnn.data.fonts import font_info

    folder = L.latin_dir(cache)
    taken = {(i.family.lower(), i.style.lower()) for i in map(font_info, system_fonts()) if i is not None}
    system_families = {fam for fam, _ in taken}
    keep, why = [], Counter()
    for row in rows:
        path = os.path.join(folder, row.file)
        info = font_info(path)
        key = (info.family.lower(), info.style.lower()) if info else None
        if not draws_ascii(path):
            why["does not draw all of printable ASCII"] += 1
        elif info.family.lower() in system_families or row.family.lower() in system_families:
            why["a family the system fonts have"] += 1
        elif key in taken:
            why["a family and style another file has"] += 1
        else:
            taken.add(key)
            keep.append(row)
    regular = {r.package for r in keep if r.variant == "400-normal"}
    dropped = {r.package for r in keep} - regular
    caps = sum(font_info(os.path.join(folder, r.file)).caps_only for r in keep)
    say(f"{len(keep)} of {len(rows)} files pass ({caps} of them all-caps faces); left out: "
        + ", ".join(f"{n} {w}" for w, n in sorted(why.items())) + f"; {len(dropped)} families lose their regular face")
    return [r for r in keep if r.package in regular]


# ---- holding out


def groups(rows: list[L.LatinFace]) -> list[set[str]]:
    """Packages joined by a shared designer key (:func:`designer_keys`), as sets."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r in rows:
        for k in designer_keys(r.designer, r.family, r.parent):
            parent[find("pkg:" + r.package)] = find(k)
    members: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        members[find("pkg:" + r.package)].add(r.package)
    return sorted(members.values(), key=lambda g: sorted(g))


def hold_out(rows: list[L.LatinFace], forbidden: str, say=print) -> list[L.LatinFace]:
    """``rows`` with about HELDOUT_SHARE of the families of each category, whole groups, set to ``heldout``: groups of
    at most three families, each naming its designer, whose keys no line of ``forbidden`` (system and CJK face names)
    contains."""
    first = {r.package: r for r in rows if r.variant == "400-normal"}
    per_cat = Counter(r.category for r in first.values())
    target = {c: max(1, round(HELDOUT_SHARE * n)) for c, n in per_cat.items()}
    held: set[str] = set()
    got: Counter = Counter()

    def clean(group: set[str]) -> bool:
        # every family names its designer (a holder's name or contact, not only "The X Project Authors" at
        # github.com/googlefonts), and none of those names is a system or CJK face's
        per = [designer_keys(first[p].designer, first[p].family, first[p].parent) for p in group]
        if not all(any(not k.startswith("family:") for k in keys) for keys in per):
            return False
        keys = set().union(*per)
        words = {k.split(":", 1)[1] for k in keys}
        return not any(re.search(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])", forbidden) for w in words if len(w) >= 3)

    order = sorted(groups(rows), key=lambda g: hashlib.sha256("\n".join(sorted(g)).encode()).hexdigest())
    for g in order:
        cats = Counter(first[p].category for p in g)
        if len(g) > 3 or any(got[c] + n > target[c] + 1 for c, n in cats.items()) or \
                all(got[c] >= target[c] for c in cats) or not clean(g):
            continue
        held |= g
        got.update(cats)
    say(f"held out {len(held)} of {len(first)} families: "
        + ", ".join(f"{c} {got[c]}/{per_cat[c]}" for c in L.CATEGORIES if c in per_cat))
    return [dataclasses.replace(r, role="heldout" if r.package in held else "train") for r in rows]


def write(rows: list[L.LatinFace], path: str = L.LATIN_MANIFEST) -> None:
    """The manifest file, rows sorted by package then variant (atomically)."""
    order = {v: i for i, v in enumerate(L.VARIANTS)}
    rows = sorted(rows, key=lambda r: (r.package, order[r.variant]))
    head = ("# The Latin web faces of the synthetic generator: role (train | heldout: whole designers and foundries "
            "kept out of training), category, npm package and version, file, family, variant, designer or foundry "
            "(the package's copyright holder), parent design (by hand, where the Latin is another family's), licence "
            "and the woff2 it is made from. Written by scripts/latin_faces.py --write.\n")
    text = head + "\t".join(L.LATIN_COLUMNS) + "\n" + "".join(
        "\t".join(getattr(r, c) for c in L.LATIN_COLUMNS) + "\n" for r in rows)
    Path(path + ".tmp").write_text(text, encoding="utf-8")
    os.replace(path + ".tmp", path)


def rewrite(names_file: str | None, cache: str, jobs: int, say=print) -> int:
    """--write: the manifest from the packages of ``names_file`` (see the module doc)."""
    names = read_names(names_file)
    with tempfile.TemporaryDirectory() as tmp:
        gf = google_metadata(tmp)
    cands = candidates(names, gf, say)
    rows: list[L.LatinFace] = []
    problems = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for i, (got, problem) in enumerate(pool.map(lambda c: inspect(c[0], c[1], c[2], cache), cands), 1):
            rows += got
            problems += [problem] if problem else []
            if problem:
                say(f"FAILED {problem}")
            if i % 50 == 0:
                say(f"{i}/{len(cands)} packages")
    rows = check(rows, cache, say)
    cjk = "\n".join(f"{f.family}\n{f.designer}\n{f.parent}".lower() for f in load_manifest())
    rows = hold_out(rows, name_strings(system_fonts()) + "\n" + cjk, say)
    write(rows)
    L.load_latin_manifest.cache_clear()
    gone = L.prune({r.file for r in rows}, cache)
    say(f"removed {len(gone)} file(s) the manifest does not list from {L.latin_dir(cache)}")
    say(f"wrote {L.LATIN_MANIFEST}: {len({r.package for r in rows})} families, {len(rows)} files; "
        f"{len(problems)} packages failed")
    return 1 if problems else 0


def counts() -> str:
    """Families and files per category and role, as a markdown table."""
    faces = L.latin_faces()
    out = ["| category | train families (files) | held-out families (files) |", "| --- | --- | --- |"]
    for cat in (*L.CATEGORIES, None):
        cells = []
        for role in L.LATIN_ROLES:
            fs = [f for f in faces if f.role == role and cat in (None, f.category)]
            cells.append(f"{len({f.package for f in fs})} ({len(fs)})")
        out.append(f"| {cat or 'all'} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fetch", action="store_true", help="fetch the manifest's faces into the font cache")
    p.add_argument("--role", action="append", choices=L.LATIN_ROLES, help="with --fetch: only these roles")
    p.add_argument("--jobs", type=int, default=4, help="packages downloaded at a time (default 4)")
    p.add_argument("--write", action="store_true", help="rewrite crnn/data/latin_faces.tsv (downloads every package)")
    p.add_argument("--names", help="with --write: the packages to consider, one '@fontsource/<id>[<TAB>version]' "
                                   "a line")
    p.add_argument("--counts", action="store_true", help="families and files per category and role")
    args = p.parse_args(argv)
    if not (args.fetch or args.write or args.counts):
        p.error("nothing to do: give --fetch, --write or --counts")
    status = 0
    if args.write:
        status = rewrite(args.names, font_cache_dir(), args.jobs)
    if args.fetch:
        want = [f for f in L.latin_faces() if not args.role or f.role in args.role]
        gone = L.prune({f.file for f in L.latin_faces()})
        if gone:
            print(f"latin faces: removed {len(gone)} file(s) the manifest does not list: {', '.join(gone[:5])} ...")
        _, problems = L.fetch_latin_faces(want, jobs=args.jobs)
        if problems:
            print(f"latin_faces: {len(problems)} package(s) not fetched (run again to retry):\n  "
                  + "\n  ".join(problems), file=sys.stderr)
            status = 1
    if args.counts:
        print(counts())
    return status


if __name__ == "__main__":
    sys.exit(main())
