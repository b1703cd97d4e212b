"""Write crnn/data/cjk_faces.tsv: every CJK face of the Chinese line model with its provenance, and fetch the npm ones.

    python scripts/face_manifest.py --fetch          # npm faces into the font cache (~/.cache/crnn/fonts)
    python scripts/face_manifest.py --write          # rewrite the manifest from the packages installed here
    python scripts/face_manifest.py --coverage       # faces and families per role, and which draw >= 95 % of GB 2312
                                                     # level-1 Hanzi

The provenance (designer or foundry, parent design, style) is written here, per package, from the packages' own
copyright files and the Google Fonts metadata; versions, files and families are read from what is installed. A row
for a package that is not installed here is kept as the manifest had it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crnn.data.faces import COLUMNS, MANIFEST, Face, faces, fetch_faces, font_cache_dir, load_manifest  # noqa: E402

# Debian packages of training faces: (style, designer or foundry, parent design)
DEBIAN_TRAIN = {
    "fonts-wqy-microhei": ("Hei", "WenQuanYi project", "Droid Sans Fallback (Ascender)"),
    "fonts-wqy-zenhei": ("Hei", "WenQuanYi project", "WenQuanYi Zen Hei"),
    "fonts-arphic-uming": ("Ming/Song", "Arphic Technology", "AR PL Mingti2L Big5 / AR PL SungtiL GB"),
    "fonts-arphic-ukai": ("Kai", "Arphic Technology", "AR PL ZenKai (from AR PL KaitiM Big5 / GB)"),
    "fonts-arphic-bsmi00lp": ("Ming/Song", "Arphic Technology", "AR PL Mingti2L Big5"),
    "fonts-arphic-bkai00mp": ("Kai", "Arphic Technology", "AR PL KaitiM Big5"),
    "fonts-noto-cjk": ("Hei, Song", "Adobe and Google (Iwata, Changzhou SinoType, Sandoll)",
                       "Source Han Sans / Source Han Serif"),
    "fonts-noto-cjk-extra": ("Hei, Song", "Adobe and Google (Iwata, Changzhou SinoType, Sandoll)",
                             "Source Han Sans / Source Han Serif"),
    "fonts-smiley-sans": ("condensed oblique display", "Atelier Anchor", "Smiley Sans"),
    "fonts-hanazono": ("Mincho", "GlyphWiki (KAMICHI Koichi)", "GlyphWiki"),
    "fonts-cns11643-kai": ("Kai", "Taiwan National Development Council (CNS 11643)", "CNS 11643 standard Kai"),
    "fonts-cns11643-sung": ("Ming/Song", "Taiwan National Development Council (CNS 11643)", "CNS 11643 standard Sung"),
    "fonts-babelstone-han": ("Ming/Song", "BabelStone (Andrew West)", "AR PL Mingti2L / SungtiL (Arphic)"),
    "fonts-cwtex-ming": ("Ming/Song", "cwTeX project (Tsong-Min Wu, Tsong-Huey Wu)", "cwTeX Ming"),
    "fonts-cwtex-kai": ("Kai", "cwTeX project (Tsong-Min Wu, Tsong-Huey Wu)", "cwTeX Kai"),
    "fonts-cwtex-fs": ("FangSong", "cwTeX project (Tsong-Min Wu, Tsong-Huey Wu)", "cwTeX FangSong"),
    "fonts-cwtex-heib": ("Hei", "cwTeX project (Tsong-Min Wu, Tsong-Huey Wu)", "cwTeX HeiBold"),
    "fonts-cwtex-yen": ("rounded Hei", "cwTeX project (Tsong-Min Wu, Tsong-Huey Wu)", "cwTeX Yen"),
    "fonts-ipafont-gothic": ("Gothic (Japanese)", "IPA (Information-technology Promotion Agency, Japan)", "IPA fonts"),
    "fonts-ipafont-mincho": ("Mincho (Japanese)", "IPA (Information-technology Promotion Agency, Japan)", "IPA fonts"),
    "fonts-ipaexfont-gothic": ("Gothic (Japanese)", "IPA (Information-technology Promotion Agency, Japan)",
                               "IPA fonts"),
    "fonts-ipaexfont-mincho": ("Mincho (Japanese)", "IPA (Information-technology Promotion Agency, Japan)",
                               "IPA fonts"),
    "fonts-ipamj-mincho": ("Mincho (Japanese)", "IPA (Information-technology Promotion Agency, Japan)", "IPA mj Mincho"),
    "fonts-vlgothic": ("Gothic (Japanese)", "Daisuke Suzuki (VL Gothic)", "M+ fonts and Sazanami Gothic (Wadalab)"),
    "fonts-motoya-l-cedar": ("Gothic (Japanese)", "Motoya", "Motoya L Cedar"),
    "fonts-motoya-l-maruberi": ("rounded Gothic (Japanese)", "Motoya", "Motoya L Maruberi"),
    "fonts-sawarabi-gothic": ("Gothic (Japanese)", "mshio (Sawarabi fonts)", "Sawarabi"),
    "fonts-sawarabi-mincho": ("Mincho (Japanese)", "mshio (Sawarabi fonts)", "Sawarabi"),
    "fonts-kouzan-mouhitsu": ("brush (Japanese)", "Aoyagi Kouzan", "Kouzan brush"),
    "fonts-aoyagi-kouzan-t": ("brush (Japanese)", "Aoyagi Kouzan", "Kouzan brush"),
    "fonts-aoyagi-soseki": ("handwriting (Japanese)", "Aoyagi (after Natsume Soseki's hand)", "Soseki"),
    "fonts-seto": ("handwriting (Japanese)", "setoguchi (Seto font)", "Seto font"),
    "fonts-konatu": ("Gothic (Japanese)", "Konatu font (NONAKA Masaki)", "Konatu"),
    # pen handwriting for the Hanzi Japanese shares (64 and 69 % of GB 2312 level 1): kiloji (BSD-3-Clause) and
    # Y.OzFont (SIL OFL 1.1; its other kana packages draw the same Kanji)
    "fonts-kiloji": ("handwriting (Japanese)", "kilo (Kironono)", "kiloji"),
    "fonts-yozvox-yozfont-standard-kana": ("handwriting (Japanese)", "Y.Oz (Y.OzVox)", "Y.OzFont"),
}
# Debian packages of the first yardstick's held-out faces (issue 31): kept out of training, not held out by design
# (AR PL SungtiL / KaitiM share their foundry with AR PL UMing / UKai, Droid Sans Fallback is WenQuanYi Micro Hei's
# parent)
DEBIAN_HELDOUT = {
    "fonts-arphic-gbsn00lp": ("Ming/Song", "Arphic Technology", "AR PL SungtiL GB"),
    "fonts-arphic-gkai00mp": ("Kai", "Arphic Technology", "AR PL KaitiM GB"),
    "fonts-droid-fallback": ("Hei", "Ascender (for Google)", "Droid Sans Fallback"),
    "fonts-lxgw-wenkai": ("Kai", "LXGW (Lxgw Wu)", "Klee One (Fontworks)"),
}
# npm faces: (role, style, package, version, slices glob, file, designer or foundry, parent design)
NPM = [
    # the honest yardstick's development faces (levers are chosen on these)
    ("dev", "brush Kai", "@fontsource/ma-shan-zheng", "5.3.1", "files/ma-shan-zheng-*-400-normal.woff2",
     "MaShanZheng-merged.ttf", "Ma ShanZheng", "Ma Shan Zheng"),
    ("dev", "handwriting", "@fontsource/long-cang", "5.3.0", "files/long-cang-*-400-normal.woff2",
     "LongCang-merged.ttf", "Chen Xiaomin", "Long Cang"),
    ("dev", "brush (xingshu)", "@chinese-fonts/hlxsjt", "1.2.0", "dist/*/*.woff2", "HongLeiXingShu-merged.ttf",
     "Honglei (copyright 2022, name garbled in the font)", "Honglei Xingshu"),
    ("dev", "Hei", "misans", "4.1.0", "lib/Normal/MiSans-Regular.*.woff2", "MiSans-Regular-merged.ttf",
     "Xiaomi", "MiSans"),
    # the honest yardstick's final faces (scored once a choice is committed)
    ("final", "condensed display", "@fontsource/zcool-qingke-huangyou", "5.3.0",
     "files/zcool-qingke-huangyou-*-400-normal.woff2", "ZCOOLQingKeHuangYou-merged.ttf", "Zheng Qingke (ZCOOL)",
     "ZCOOL QingKe HuangYou"),
    ("final", "title Song", "@fontsource/zcool-xiaowei", "5.3.0", "files/zcool-xiaowei-*-400-normal.woff2",
     "ZCOOLXiaoWei-merged.ttf", "Li Dawei (ZCOOL)", "ZCOOL XiaoWei"),
    ("final", "rounded Hei", "@fontsource/zcool-kuaile", "5.3.0", "files/zcool-kuaile-*-400-normal.woff2",
     "ZCOOLKuaiLe-merged.ttf", "Liu Bingke, Yang Kang, Wu Shaojie (ZCOOL)", "ZCOOL KuaiLe"),
    ("final", "Kai", "@chinese-fonts/jxzk", "1.3.0", "dist/*/*.woff2", "JiangxiZhuokai-merged.ttf",
     "Jiangxi Zhuokai authors", "Jiangxi Zhuokai"),
    ("final", "brush (xingshu)", "@fontsource/zhi-mang-xing", "5.3.0", "files/zhi-mang-xing-*-400-normal.woff2",
     "ZhiMangXing-merged.ttf", "Wei Zhimang", "Zhi Mang Xing"),
    ("final", "Hei", "harmonyos-sans-sc-webfont-splitted", "1.1.0", "dist/Regular_*.woff2",
     "HarmonyOSSansSC-Regular-merged.ttf", "Huawei", "HarmonyOS Sans"),
    # training faces from npm (Japanese faces: they draw the Hanzi that Japanese shares; none by Fontworks, whose
    # Klee One is the parent of the held-out LXGW WenKai)
    ("train", "rounded Gothic (Japanese)", "@fontsource/zen-maru-gothic", "5.3.0",
     "files/zen-maru-gothic-*-400-normal.woff2", "ZenMaruGothic-merged.ttf", "Yoshimichi Ohira", "Zen Maru Gothic"),
    ("train", "Mincho (Japanese)", "@fontsource/zen-old-mincho", "5.3.0", "files/zen-old-mincho-*-400-normal.woff2",
     "ZenOldMincho-merged.ttf", "Yoshimichi Ohira", "Zen Old Mincho"),
    ("train", "rounded (Japanese)", "@fontsource/kiwi-maru", "5.3.0", "files/kiwi-maru-*-400-normal.woff2",
     "KiwiMaru-merged.ttf", "Hiroki-Chan", "Kiwi Maru"),
    ("train", "rounded Gothic (Japanese)", "@fontsource/m-plus-rounded-1c", "5.3.0",
     "files/m-plus-rounded-1c-*-700-normal.woff2", "MPLUSRounded1c-Bold-merged.ttf", "Coji Morishita (M+ FONTS)",
     "M+ fonts"),
    ("train", "heavy display Gothic (Japanese)", "@fontsource/dela-gothic-one", "5.3.0",
     "files/dela-gothic-one-*-400-normal.woff2", "DelaGothicOne-merged.ttf", "artakana", "Dela Gothic One"),
    ("train", "Mincho (Japanese)", "@fontsource/shippori-mincho", "5.3.0", "files/shippori-mincho-*-400-normal.woff2",
     "ShipporiMincho-merged.ttf", "FONTDASU", "Shippori Mincho"),
    ("train", "Gothic (Japanese)", "@fontsource/biz-udpgothic", "5.3.0", "files/biz-udpgothic-*-400-normal.woff2",
     "BIZUDPGothic-merged.ttf", "Morisawa", "BIZ UD Gothic"),
    ("train", "Gothic (Japanese)", "@fontsource/ibm-plex-sans-jp", "5.3.0", "files/ibm-plex-sans-jp-*-500-normal.woff2",
     "IBMPlexSansJP-Medium-merged.ttf", "IBM (Mike Abbink, Bold Monday)", "IBM Plex"),
    ("train", "marker (Japanese)", "@fontsource/yusei-magic", "5.3.0", "files/yusei-magic-*-400-normal.woff2",
     "YuseiMagic-merged.ttf", "Tanukifont", "Yusei Magic"),
    # training faces from the Chinese Web Font project (@chinese-fonts, KonghaYao): free Chinese display, rounded,
    # marker and pixel designs, every one drawing all 3,755 GB 2312 level-1 Hanzi. Licence after each row (the font's
    # name table where it says one, else its publisher's terms as the project lists them). Left out: lxgwwenkai
    # (LXGW WenKai, held out), hlxsjt and jxzk (yardstick faces), dyh (Smiley Sans: trains from Debian), syst and
    # sypxzs (Source Han Serif and a display retouch of it: Noto Serif CJK trains), tjl (Tiejili: part of it is
    # Fontworks' Reggae One, and Fontworks drew Klee One, LXGW WenKai's parent); the scope's other names in the
    # project's repository are not on the registry.
    ("train", "title Hei (heavy oblique display)", "@chinese-fonts/ysbth", "1.3.0", "dist/*/*.woff2",
     "YouSheBiaoTiHei-merged.ttf", "YouShe (uisdc)", "YouShe Biaoti Hei"),  # free for commercial use (YouShe)
    ("train", "light condensed Hei", "@chinese-fonts/bwckkt", "1.3.0", "dist/*-Regular/*.woff2",
     "BaiWuChangKeKe-Regular-merged.ttf", "LBK (psc4d.cn, Bai Wuchang)", "Bai Wuchang KeKe"),  # free commercial use
    ("train", "pixel (bitmap)", "@chinese-fonts/cubic", "1.2.0", "dist/*/*.woff2", "Cubic11-merged.ttf",
     "Neo K. Shih-yin Ke, Luke Liu (Cubic 11)", "JF Dot M+H 12 / M+ bitmap fonts (Coji Morishita)"),  # free, any use
    ("train", "heavy Hei", "@chinese-fonts/dymh", "3.0.0", "dist/*/*.woff2", "DouyinSans-Bold-merged.ttf",
     "Founder Type (for ByteDance Douyin)", "Douyin Sans"),  # free for commercial use (ByteDance)
    ("train", "heavy oblique display", "@chinese-fonts/dyzgt", "1.2.0", "dist/*/*.woff2", "DouyuFont-merged.ttf",
     "DOUYU (Douyu TV)", "DOUYU Font"),  # free for commercial use (Douyu)
    ("train", "oblique title Hei", "@chinese-fonts/kksjt", "3.0.0", "dist/*/*.woff2", "KuaikanShijie-merged.ttf",
     "Kuaikan Comics", "Kuaikan Shijie Ti"),  # free for commercial use (Kuaikan)
    ("train", "rounded Hei (monospace)", "@chinese-fonts/maple-mono-cn", "2.0.0", "dist/MapleMono-CN-Regular/*.woff2",
     "MapleMonoCN-Regular-merged.ttf", "subframe7536 (Maple Mono), CyanoHao (Resource Han Rounded)",
     "Resource Han Rounded (from Source Han Sans)"),  # SIL OFL 1.1
    ("train", "marker handwriting", "@chinese-fonts/mksjh", "1.4.0", "dist/*/*.woff2", "MaokenAssortedSans-merged.ttf",
     "ZERO (Skr-ZERO, for Maoken)", "Nishiki-teki (Umihotaru)"),  # SIL OFL 1.1
    ("train", "rounded Hei", "@chinese-fonts/mkwtyt", "1.4.0", "dist/*/*.woff2", "MaokenTangYuan-merged.ttf",
     "Maoken, NightFurySL2001", "jf open huninn (justfont) from Kosugi Maru (Motoya)"),  # SIL OFL 1.1
    ("train", "square display Hei", "@chinese-fonts/stmdxf", "3.0.0", "dist/*/*.woff2",
     "ShetuModengXiaoFang-merged.ttf", "699pic (Shetu, Shanghai Hanzhong)", "Shetu Modeng XiaoFang"),  # free commercial
    # training faces from Fontsource (Google Fonts files, issue 43): the Chinese cursive Liu Jian Mao Cao (all 3,755
    # level-1 Hanzi), the traditional-form Ming Cactus Classical Serif (99 %) and Japanese brush, handwriting, Mincho,
    # antique and Gothic designs, which draw 58-73 % of level 1 (the Hanzi Japanese shares). Designers from the Google
    # Fonts metadata and each font's copyright line; licence after each row. One face per design: where a family's
    # faces draw the same Kanji outlines only one is listed (Yuji Syuku for Yuji Boku / Mai, Kaisei Decol for Opti /
    # Tokumin / HarunoUmi, Mochiy Pop One for its P face, Zen Kaku Gothic New for Antique, BIZ UDPMincho for
    # UDMincho). Left out: M PLUS 2 and M PLUS 1 (one Kanji design; their 400 files keep the variable font's name,
    # "M PLUS 2 Thin", which the hairline filter refuses) and M PLUS 1 Code (that design set monospace),
    # Fontworks' faces (Klee One, Reggae One, RocknRoll One, Stick, Train One, DotGothic16, Potta One, Rampart One,
    # Hachi Maru Pop) and Iansui (from Klee One), LXGW WenKai TC and LXGW Marker Gothic (LXGW), the WDXL Lubrifont
    # faces (built on ZCOOL QingKe HuangYou, a final face), Kosugi / Kosugi Maru and Sawarabi (the Motoya and Sawarabi
    # designs train from Debian), Huninn (jf open huninn, Maoken TangYuan's parent, from Kosugi Maru), the Noto CJK
    # faces, Chiron Hei HK and Chocolate Classical Sans (Source Han Sans: Noto CJK trains; Chocolate also credits
    # LXGW XiHei), Murecho (38 % of level 1), kana-only faces (Darumadrop One, Slackside One, Chokokutai, Tsukimi
    # Rounded, Zen Tokyo Zoo, Yuji Hentaigana Akebono) and Chiron GoRound TC (its merged cmap overflows). Not
    # measured: the Korean faces, Chiron Sung HK (only a variable font, in @fontsource-variable).
    ("train", "cursive brush (caoshu)", "@fontsource/liu-jian-mao-cao", "5.3.0",
     "files/liu-jian-mao-cao-*-400-normal.woff2", "LiuJianMaoCao-merged.ttf",
     "Liu Zhengjiang, ZhongQi; Latin Kimberly Geswein", "Liu Jian Mao Cao"),  # SIL OFL 1.1
    ("train", "brush Mincho (Japanese)", "@fontsource/yuji-syuku", "5.3.0", "files/yuji-syuku-*-400-normal.woff2",
     "YujiSyuku-merged.ttf", "Kinuta Font Factory", "Yuji"),  # SIL OFL 1.1
    ("train", "brush handwriting (Japanese)", "@fontsource/zen-kurenaido", "5.3.0",
     "files/zen-kurenaido-*-400-normal.woff2", "ZenKurenaido-merged.ttf", "Yoshimichi Ohira", "Zen Kurenaido"),  # OFL
    ("train", "handwriting (Japanese)", "@fontsource/yomogi", "5.3.0", "files/yomogi-*-400-normal.woff2",
     "Yomogi-merged.ttf", "Satsuyako", "Yomogi"),  # SIL OFL 1.1
    ("train", "Mincho (Japanese)", "@fontsource/kaisei-decol", "5.3.0", "files/kaisei-decol-*-400-normal.woff2",
     "KaiseiDecol-merged.ttf", "Font-Kai", "Kaisei"),  # SIL OFL 1.1
    ("train", "soft Mincho (Japanese)", "@fontsource/hina-mincho", "5.2.8", "files/hina-mincho-*-400-normal.woff2",
     "HinaMincho-merged.ttf", "Satsuyako", "Hina Mincho"),  # SIL OFL 1.1
    ("train", "retro Mincho (Japanese)", "@fontsource/new-tegomin", "4.5.9", "files/new-tegomin-*-400-normal.woff2",
     "NewTegomin-merged.ttf", "Kousuke Nagai", "New Tegomin"),  # SIL OFL 1.1
    ("train", "heavy rounded pop Gothic (Japanese)", "@fontsource/mochiy-pop-one", "5.3.0",
     "files/mochiy-pop-one-*-400-normal.woff2", "MochiyPopOne-merged.ttf", "FONTDASU", "Mochiy Pop"),  # SIL OFL 1.1
    ("train", "Gothic (Japanese)", "@fontsource/zen-kaku-gothic-new", "5.3.0",
     "files/zen-kaku-gothic-new-*-400-normal.woff2", "ZenKakuGothicNew-merged.ttf", "Yoshimichi Ohira",
     "Zen Kaku Gothic"),  # SIL OFL 1.1
    ("train", "antique Mincho (Japanese)", "@fontsource/zen-antique", "5.3.0", "files/zen-antique-*-400-normal.woff2",
     "ZenAntique-merged.ttf", "Yoshimichi Ohira", "Zen Antique"),  # SIL OFL 1.1
    ("train", "soft antique Mincho (Japanese)", "@fontsource/zen-antique-soft", "5.2.8",
     "files/zen-antique-soft-*-400-normal.woff2", "ZenAntiqueSoft-merged.ttf", "Yoshimichi Ohira",
     "Zen Antique"),  # SIL OFL 1.1
    ("train", "antique Gothic (Japanese)", "@fontsource/shippori-antique", "5.3.0",
     "files/shippori-antique-*-400-normal.woff2", "ShipporiAntique-merged.ttf", "FONTDASU",
     "Shippori Antique"),  # SIL OFL 1.1
    ("train", "Gothic (Japanese)", "@fontsource/m-plus-1p", "5.3.0", "files/m-plus-1p-*-400-normal.woff2",
     "MPLUS1p-merged.ttf", "Coji Morishita (M+ FONTS)", "M+ fonts"),  # SIL OFL 1.1
    ("train", "Mincho (Japanese)", "@fontsource/biz-udpmincho", "5.3.0", "files/biz-udpmincho-*-400-normal.woff2",
     "BIZUDPMincho-merged.ttf", "Morisawa", "BIZ UD Mincho"),  # SIL OFL 1.1
    ("train", "Ming/Song (traditional forms)", "@fontsource/cactus-classical-serif", "5.3.0",
     "files/cactus-classical-serif-*-400-normal.woff2", "CactusClassicalSerif-merged.ttf",
     "Tian Haidong, Henry Chan, Moonlit Owen", "Hong Kong Character Set glyphs (Henry Chan, GlyphWiki); Latin GenYoMin "
     "(But Ko)"),  # SIL OFL 1.1
    # training faces from the cn-fontsource npm packages (wc-ex/cn-fontsource: Chinese faces cut into woff2 slices by
    # Unicode range), each drawing all 3,755 level-1 Hanzi; licence after each row (the package README says "not open
    # source, free for commercial use", as for the @chinese-fonts display faces above). Left out: the Honglei faces
    # (hongleixingshu, honglei-sim, hong-lei-zhuo-shu: Honglei drew the development face Honglei Xingshu), the Yozai
    # and LXGW WenKai packages (LXGW), 975 Maru (from Source Han Sans and Swei Gothic), Source Han Serif, Founder's
    # FZ Kai / Hei / ShuSong / FangSong (Founder licenses commercial use per user, on request) and FZ JiaGuWen (1,432
    # oracle-bone forms). Not on the registry (asked by name): Slide Qiuhong / Youran / Fu, DingTalk JinBuTi, Long
    # Zhu Ti, Xiaolai Mono, Maoken ZhuYuan (built on Fontworks' RocknRoll One in any case).
    ("train", "heavy brush Kai", "cn-fontsource-alimama-dong-fang-da-kai-regular", "1.0.3", "*.woff2",
     "AlimamaDongFangDaKai-merged.ttf", "Alimama (Alibaba)",
     "Alimama DongFangDaKai (generated from Yan Zhenqing's Duobao Pagoda stele)"),  # free commercial use (Alimama)
    ("train", "title Song", "cn-fontsource-fontquan-xin-yi-ji-xiang-song-regular", "1.0.7", "*.woff2",
     "FontquanXinYiJiXiangSong-merged.ttf", "Zoulewei (Fontquan XinYi)",
     "Fontquan XinYi JiXiangSong"),  # free for commercial use (Fontquan)
]


def npm_distributor(pkg: str) -> str:
    """Who distributes an npm face package (the scope's maintainers, or the package's own)."""
    if pkg.startswith("@fontsource/"):
        return "npm: Fontsource (Google Fonts files)"
    if pkg.startswith("@chinese-fonts/"):
        return "npm: chinese-fonts (KonghaYao)"
    if pkg.startswith("cn-fontsource-"):
        return "npm: cn-fontsource (wc-ex)"
    return f"npm: {pkg}"


def _installed(pkg: str) -> tuple[str, list[str]] | None:
    """(version, font files) of an installed Debian package, or None."""
    run = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    if run.returncode != 0 or not run.stdout:
        return None
    files = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout.split()
    return run.stdout, sorted(f for f in files if f.lower().endswith((".ttf", ".otf", ".ttc")) and os.path.isfile(f))


def _family(path: str) -> str:
    """FreeType's family name; the name table's best one where FreeType's is unreadable (a Macintosh record of
    Chinese in a single-byte encoding reads as question marks: Kuaikan Shijie Ti)."""
    from fontTools.ttLib import TTFont
    from PIL import ImageFont

    try:
        name = ImageFont.truetype(path, 20).getname()[0] or ""
    except OSError:
        return ""
    if name.strip("?_ "):
        return name
    return TTFont(path, fontNumber=0)["name"].getBestFamilyName() or name


def rows() -> list[Face]:
    """The manifest as it stands on this machine (a package not installed here keeps its old rows)."""
    old = load_manifest() if os.path.isfile(MANIFEST) else ()
    out: list[Face] = []
    for role, table in (("train", DEBIAN_TRAIN), ("heldout", DEBIAN_HELDOUT)):
        for pkg, (style, designer, parent) in table.items():
            got = _installed(pkg)
            if got is None:
                out += [f for f in old if f.package == pkg]
                continue
            version, files = got
            out += [Face(role, style, "Debian", pkg, version, os.path.basename(p), _family(p), designer, parent)
                    for p in files]
    cache = font_cache_dir()
    for role, style, pkg, version, glob, file, designer, parent in NPM:
        path = os.path.join(cache, file)
        family = _family(path) if os.path.isfile(path) else next((f.family for f in old if f.file == file), "")
        out.append(Face(role, style, npm_distributor(pkg), pkg, version, file, family, designer, parent, glob))
    return out


def write(faces_: list[Face]) -> None:
    head = ("# Every CJK face of the Chinese line model: role (train | heldout: the first yardstick's faces | dev / "
            "final: the honest yardstick's), provenance, file and family. Written by scripts/face_manifest.py.\n")
    lines = [head, "\t".join(COLUMNS) + "\n"]
    lines += ["\t".join(getattr(f, c) for c in COLUMNS) + "\n" for f in faces_]
    tmp = MANIFEST + ".tmp"
    Path(tmp).write_text("".join(lines), encoding="utf-8")
    os.replace(tmp, MANIFEST)


def gb2312_level1() -> str:
    """The 3,755 level-1 Hanzi of GB 2312 (rows 16-55)."""
    out = []
    for row in range(16, 56):
        for col in range(1, 95):
            try:
                out.append(bytes([0xA0 + row, 0xA0 + col]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return "".join(out)


def coverage() -> None:
    """Faces and families per role, and each file's share of GB 2312 level-1 Hanzi."""
    from crnn.data.fonts import _drawn, font_info

    level1 = tuple(gb2312_level1())
    dirs = ["/usr/share/fonts", font_cache_dir()]
    where = {os.path.basename(p): p for d in dirs for r, _, fs in os.walk(d) for p in (os.path.join(r, f) for f in fs)}
    print("| role | file | family | style | GB 2312 level-1 drawn |\n| --- | --- | --- | --- | --- |")
    stats: dict[str, list] = {}
    for f in faces():
        path = where.get(f.file)
        info = font_info(path) if path else None
        share = len(_drawn(path, level1)) / len(level1) if info is not None and info.cjk else 0.0
        s = stats.setdefault(f.role, [0, set(), 0])
        s[0] += path is not None
        s[1].add(f.family)
        s[2] += share >= 0.95
        print(f"| {f.role} | {f.file} | {f.family} | {f.style} | "
              f"{'not here' if path is None else f'{100 * share:.1f} %'} |")
    for role, (n, fam, full) in stats.items():
        print(f"\n{role}: {n} files here, {len(fam)} families, {full} drawing >= 95 % of GB 2312 level 1", end="")
    print()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fetch", action="store_true", help="fetch and merge the npm faces into the font cache")
    p.add_argument("--role", action="append", help="with --fetch: only these roles (train, dev, final)")
    p.add_argument("--tarballs", help="with --fetch: keep / reuse npm pack tarballs in this folder")
    p.add_argument("--write", action="store_true", help="rewrite crnn/data/cjk_faces.tsv from this machine")
    p.add_argument("--coverage", action="store_true", help="per face: share of GB 2312 level-1 Hanzi drawn")
    args = p.parse_args(argv)
    if args.fetch:
        want = [f for f in rows() if f.npm and (not args.role or f.role in args.role)]
        _, problems = fetch_faces(want, tarballs=args.tarballs)
        if problems:
            print("face_manifest: " + str(len(problems)) + " face(s) not fetched:\n  " + "\n  ".join(problems),
                  file=sys.stderr)
            return 1
    if args.write:
        write(rows())
        load_manifest.cache_clear()
        print(f"wrote {MANIFEST}: {len(load_manifest())} faces")
    if args.coverage:
        coverage()
    return 0


if __name__ == "__main__":
    sys.exit(main())
