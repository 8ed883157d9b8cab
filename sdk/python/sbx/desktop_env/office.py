"""OSWorld's file metrics that need Debian's Python modules: `compare_images` (upstream
metrics/vlc.py) and `compare_docx_files` (metrics/docs.py), written here from upstream's
behaviour. Pillow, numpy and python-docx are imported only when a metric runs, so the SDK stays
standard-library only; a missing module fails the evaluation naming the Debian package.
"""

from __future__ import annotations

import importlib
import re
import sys
import xml.etree.ElementTree as ET
import zipfile
from typing import Any, Callable, Dict, List, Optional

from .errors import EvaluationError


def need(module: str, package: str, metric: str) -> Any:
    """`module`, or EvaluationError naming the Debian package that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise EvaluationError("metric `%s` needs the Python module `%s` (%s): install Debian's "
                              "%s for %s" % (metric, module, e, package, sys.executable))


# ---- rapidfuzz's fuzz.ratio: 100 * (1 - indel distance / total length)
def _lcs_length(a: str, b: str) -> int:
    """Longest common subsequence, bit-parallel over `a` (Hyyro's algorithm on Python ints)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: Dict[str, int] = {}
    for ch in set(a):
        masks[ch] = int("".join("1" if c == ch else "0" for c in reversed(a)), 2)
    full = (1 << len(a)) - 1
    v = full
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def fuzz_ratio(a: str, b: str) -> float:
    """rapidfuzz.fuzz.ratio(a, b): 0..100, 100 for equal strings (two empty ones included)."""
    total = len(a) + len(b)
    if total == 0:
        return 100.0
    dist = total - 2 * _lcs_length(a, b)
    return 100.0 * (1.0 - dist / total)


# ---- compare_images: SSIM of the grey images, as skimage's structural_similarity
def _box_means(a: Any, w: int, np: Any) -> Any:
    """Means of every w x w window lying inside `a` (exact sums: the pixels are integers)."""
    c = np.zeros((a.shape[0] + 1, a.shape[1] + 1))
    c[1:, 1:] = a.cumsum(0).cumsum(1)
    return (c[w:, w:] - c[:-w, w:] - c[w:, :-w] + c[:-w, :-w]) / float(w * w)


def ssim(x: Any, y: Any, np: Any) -> float:
    """skimage.metrics.structural_similarity(x, y) for 2-D uint8 arrays with its defaults:
    7x7 uniform windows, sample covariance, K1 0.01, K2 0.03, data range 255, the mean over
    the image less its 3-pixel border (the windows that need no padding)."""
    w = 7
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    n = w * w
    ux, uy = _box_means(x, w, np), _box_means(y, w, np)
    norm = n / (n - 1.0)
    vx = norm * (_box_means(x * x, w, np) - ux * ux)
    vy = norm * (_box_means(y * y, w, np) - uy * uy)
    vxy = norm * (_box_means(x * y, w, np) - ux * uy)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return float(s.mean())


def _grey(path: str, image: Any) -> Optional[Any]:
    try:
        with image.open(path) as im:
            return im.convert("L")
    except (OSError, ValueError):
        return None


def compare_images(image1_path: Optional[str], image2_path: Optional[str],
                   **options: Any) -> float:
    """Upstream's score: the SSIM of the two images in grey, both resized (Lanczos) to the
    smaller size (Python's min of the (width, height) tuples, as upstream); with
    `reference_base_result` b, (ssim - b) / (1 - b) when ssim >= b + 0.01, else 0. A missing
    or unreadable file, or an image under 7x7 pixels, scores 0 (upstream raised)."""
    if not image1_path or not image2_path:
        return 0.0
    image = need("PIL.Image", "python3-pil", "compare_images")
    np = need("numpy", "python3-numpy", "compare_images")
    im1, im2 = _grey(image1_path, image), _grey(image2_path, image)
    if im1 is None or im2 is None:
        return 0.0
    size = min(im1.size, im2.size)
    if min(size) < 7:
        return 0.0
    lanczos = getattr(image, "Resampling", image).LANCZOS
    score = ssim(np.asarray(im1.resize(size, lanczos)), np.asarray(im2.resize(size, lanczos)), np)
    base = options.get("reference_base_result")
    if base is None:
        return score
    return (score - base) / (1 - base) if score >= base + 0.01 else 0.0


# ---- compare_docx_files: paragraph texts of two .docx (python-docx) or two .odt files
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_RUN_TEXT: Dict[str, Callable[[Any], str]] = {
    _W + "t": lambda e: e.text or "",
    _W + "tab": lambda e: "\t",
    _W + "ptab": lambda e: "\t",
    _W + "cr": lambda e: "\n",
    _W + "br": lambda e: "\n" if e.get(_W + "type") in (None, "textWrapping") else "",
    _W + "noBreakHyphen": lambda e: "-",
}


def _run_text(r: Any) -> str:
    return "".join(_RUN_TEXT[c.tag](c) for c in r if c.tag in _RUN_TEXT)


def _docx_paragraph_text(p: Any) -> str:
    """python-docx 1.x's Paragraph.text (runs and hyperlinks' runs; breaks, tabs, hyphens),
    whatever python-docx version is installed."""
    out = []
    for c in p:
        if c.tag == _W + "r":
            out.append(_run_text(c))
        elif c.tag == _W + "hyperlink":
            out.extend(_run_text(r) for r in c if r.tag == _W + "r")
    return "".join(out)


def _docx_paragraphs(path: str) -> Optional[List[str]]:
    docx = need("docx", "python3-docx", "compare_docx_files")
    try:
        doc = docx.Document(path)
    except Exception:  # upstream: a file python-docx cannot open scores 0
        return None
    return [_docx_paragraph_text(p._p) for p in doc.paragraphs]


_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def _odt_paragraph_text(p: ET.Element) -> str:
    """odfpy as upstream reads a text:p: its own text nodes and those directly inside its
    text:span children (not text:s, text:tab, nested spans or links)."""
    out = [p.text or ""]
    for c in p:
        if c.tag == _TEXT + "span":
            out.append(c.text or "")
            out.extend(g.tail or "" for g in c)
        out.append(c.tail or "")
    return "".join(out)


def _odt_paragraphs(path: str) -> Optional[List[str]]:
    """Every text:p in document order as odfpy loads it: the master styles' (headers and
    footers, styles.xml), then the body's (content.xml)."""
    try:
        with zipfile.ZipFile(path) as z:
            parts = [ET.fromstring(z.read(n)) for n in ("styles.xml", "content.xml")
                     if n in z.namelist()]
    except (OSError, zipfile.BadZipFile, ET.ParseError):
        return None
    if not parts:
        return None
    return [_odt_paragraph_text(p) for part in parts for p in part.iter(_TEXT + "p")]


def _squash(paragraphs: List[str], ignore_case: bool) -> str:
    text = re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()
    return text.lower() if ignore_case else text


def _by_paragraph(p1: List[str], p2: List[str], ignore_case: bool, fuzzy: bool) -> float:
    if len(p1) != len(p2):
        return 0.0
    if ignore_case:
        p1, p2 = [p.lower() for p in p1], [p.lower() for p in p2]
    if fuzzy:
        if not p1:
            return 1.0
        return sum(fuzz_ratio(a, b) / 100.0 for a, b in zip(p1, p2)) / len(p1)
    return float(p1 == p2)


def compare_docx_files(file1: Optional[str], file2: Optional[str], **options: Any) -> float:
    """Upstream's options: `ignore_blanks` (default true: the texts with runs of whitespace made
    one space), `ignore_case`, `ignore_order` (paragraphs sorted), `content_only` (the fuzzy
    ratio of the whole texts), `fuzzy_match` (that ratio, or the mean per paragraph when
    blanks count), `delete_empty_lines`. Both files .docx or both .odt, else 0."""
    if not file1 or not file2:
        return 0.0
    if file1.endswith(".docx") and file2.endswith(".docx"):
        read = _docx_paragraphs
    elif file1.endswith(".odt") and file2.endswith(".odt"):
        read = _odt_paragraphs
    else:
        return 0.0
    p1, p2 = read(file1), read(file2)
    if p1 is None or p2 is None:
        return 0.0
    if options.get("ignore_order", False):
        p1, p2 = sorted(p1), sorted(p2)
    if options.get("delete_empty_lines", False):
        p1, p2 = [p for p in p1 if p.strip()], [p for p in p2 if p.strip()]
    ignore_case = bool(options.get("ignore_case", False))
    fuzzy = bool(options.get("fuzzy_match", False))
    if options.get("content_only", False) or (options.get("ignore_blanks", True) and fuzzy):
        return fuzz_ratio(_squash(p1, ignore_case), _squash(p2, ignore_case)) / 100.0
    if options.get("ignore_blanks", True):
        return float(_squash(p1, ignore_case) == _squash(p2, ignore_case))
    return _by_paragraph(p1, p2, ignore_case, fuzzy)
