"""OSWorld's `compare_table` (upstream metrics/table.py and the loaders of metrics/utils.py),
written here from upstream's behaviour with openpyxl alone: no pandas, lxml or formula engine.
`sheet_data` reproduces what upstream compares (`pandas.read_excel(...).round(p).equals(...)`)
from the cells' cached values: the first row as column labels, each column's dtype inferred as
pandas infers it, floats rounded as numpy rounds them. The rule types sbx does not have, and a
`style` rule over a sheet with conditional formatting, fail the evaluation naming them.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import math
import operator
import os
import re
import xml.etree.ElementTree as ET
import zipfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import EvaluationError
from .office import fuzz_ratio, need

_MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_DOC_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_X14 = "{http://schemas.microsoft.com/office/spreadsheetml/2009/9/main}"
_XM = "{http://schemas.microsoft.com/office/excel/2006/main}"


def _fail(message: str) -> EvaluationError:
    return EvaluationError("compare_table: " + message)


def _openpyxl() -> Any:
    return need("openpyxl", "python3-openpyxl", "compare_table")


# ---- the two workbooks
class _Book:
    """One side (the result or the expected file): its path, its workbook as openpyxl loads
    it (formulas, styles, charts), and, once a rule needs them, its cached cell values
    (read-only, data-only: what pandas reads) and its raw sheet XML (upstream's cell reader)."""

    def __init__(self, path: Optional[str], workbook: Any) -> None:
        self.path = path
        self.wb = workbook
        self._values: Any = None
        self._cells: Dict[str, Optional[Dict[str, Any]]] = {}

    def names(self) -> Optional[List[str]]:
        return None if self.wb is None else [ws.title for ws in self.wb.worksheets]

    def sheet(self, name: str) -> Any:
        return self.wb[name] if self.wb is not None and name in self.wb.sheetnames else None

    def values(self, name: str) -> Any:
        if self.wb is None or name not in self.wb.sheetnames:
            return None
        if self._values is None:
            self._values = _openpyxl().load_workbook(self.path, read_only=True, data_only=True,
                                                     keep_links=False)
        return self._values[name]

    def cell_value(self, name: str, coordinate: str) -> Any:
        if name not in self._cells:
            self._cells[name] = _xml_cells(self.path, name) if self.path else None
        cells = self._cells[name]
        return None if cells is None else cells.get(coordinate)

    def close(self) -> None:
        if self._values is not None:
            self._values.close()  # a read-only workbook keeps its file open

    def sheet_xml(self, name: str) -> Optional[ET.Element]:
        if not self.path:
            return None
        try:
            with zipfile.ZipFile(self.path) as z:
                return ET.fromstring(z.read(_sheet_part(z, name)))
        except (OSError, KeyError, StopIteration, zipfile.BadZipFile, ET.ParseError):
            return None


Ref = Tuple[_Book, str]


def _pick(names: Optional[List[str]], i: Any) -> str:
    try:
        return names[int(i)] if names is not None and int(i) < len(names) else ""
    except (IndexError, ValueError, TypeError):
        return ""


def _resolve(idx: Any, r: _Book, e: _Book) -> Ref:
    """Upstream's sheet index: an int or "RI<n>" (the result's n-th sheet), "RN<name>",
    "EI<n>", "EN<name>" (the expected file's); a sheet that is not there is named ""."""
    if isinstance(idx, int):
        return r, _pick(r.names(), idx)
    if isinstance(idx, str) and idx[:2] in ("RI", "RN", "EI", "EN"):
        book = r if idx[0] == "R" else e
        return book, _pick(book.names(), idx[2:]) if idx[1] == "I" else idx[2:]
    raise _fail("unrecognized sheet index %r" % (idx,))


# ---- upstream's read_cell_value: the cell's XML, not openpyxl
def _sheet_part(z: zipfile.ZipFile, name: str) -> str:
    book = ET.fromstring(z.read("xl/workbook.xml"))
    rid = next(s.get(_DOC_REL + "id") for s in book.iter(_MAIN + "sheet") if s.get("name") == name)
    rels = ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))
    target = next(r.get("Target", "") for r in rels.iter(_PKG_REL + "Relationship")
                  if r.get("Id") == rid)
    return target.lstrip("/") if target.startswith("/") else "xl/" + target


def _shared_strings(z: zipfile.ZipFile) -> List[str]:
    try:
        root = ET.fromstring(z.read("xl/sharedStrings.xml"))
    except (KeyError, ET.ParseError):
        return []
    return ["".join(t.text or "" for t in si.iter(_MAIN + "t")) for si in root.iter(_MAIN + "si")]


def _xml_value(c: ET.Element, shared: List[str]) -> Any:
    """A number (float), a shared or inline string, a formula's string or an error's text;
    None for other types (booleans too, as upstream) and for cells without a value."""
    t = c.get("t", "n")
    v = c.find(_MAIN + "v")
    text = v.text if v is not None else None
    try:
        if t == "n":
            return float(text)  # type: ignore[arg-type]
        if t == "s":
            return shared[int(text)]  # type: ignore[arg-type]
        if t in ("str", "e"):
            return text
        if t == "inlineStr":
            node = c.find(_MAIN + "is/" + _MAIN + "t")
            return node.text if node is not None else None
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _xml_cells(path: str, name: str) -> Optional[Dict[str, Any]]:
    try:
        with zipfile.ZipFile(path) as z:
            shared = _shared_strings(z)
            root = ET.fromstring(z.read(_sheet_part(z, name)))
    except (OSError, StopIteration, KeyError, zipfile.BadZipFile, ET.ParseError):
        return None
    cells: Dict[str, Any] = {}
    for row in root.iter(_MAIN + "row"):
        for c in row.findall(_MAIN + "c"):
            if c.get("r") and c.get("r") not in cells:
                cells[str(c.get("r"))] = _xml_value(c, shared)
    return cells


# ---- sheet_data: pandas.read_excel(book, sheet) as upstream reads it, then .round(p).equals
class _Missing:
    """NaN, NaT and None: equal to one another, as DataFrame.equals takes them."""

    def __repr__(self) -> str:
        return "NA"


NA = _Missing()
_NA_STRINGS = frozenset(["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                         "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                         "nan", "null"])  # pandas 2's default na_values
_NUMBER = re.compile(r"\s*[+-]?(?:(\d+)|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+"
                     r"|\.\d+(?:[eE][+-]?\d+)?|(?i:inf|infinity))\s*")
_TRUE, _FALSE = frozenset(["True", "TRUE", "true"]), frozenset(["False", "FALSE", "false"])


def _is_na(v: Any) -> bool:
    return v is NA or v is None or (isinstance(v, float) and v != v) or (
        isinstance(v, str) and v in _NA_STRINGS)


def _cell(c: Any) -> Any:
    """pandas' openpyxl reader: empty "", an error NaN, a whole number an int."""
    v = c.value
    if v is None:
        return ""
    if c.data_type == "e":
        return NA
    if c.data_type == "n" and not isinstance(v, bool):
        try:
            return int(v) if int(v) == v else float(v)
        except (OverflowError, ValueError):
            return float(v)
    return v


def _sheet_rows(ws: Any) -> List[List[Any]]:
    """The rows from A1, trailing empty cells and rows dropped, padded to the widest."""
    ws.reset_dimensions()
    rows: List[List[Any]] = []
    last = -1
    for n, row in enumerate(ws.rows):
        vals = [_cell(c) for c in row]
        while vals and isinstance(vals[-1], str) and vals[-1] == "":
            vals.pop()
        if vals:
            last = n
        rows.append(vals)
    rows = rows[:last + 1]
    width = max((len(r) for r in rows), default=0)
    return [r + [""] * (width - len(r)) for r in rows]


def _labels(header: List[Any]) -> List[Any]:
    """Column labels: "Unnamed: i" for empty cells; repeats get ".1", ".2"... (named columns
    first), as pandas' parser."""
    unnamed = [i for i, v in enumerate(header) if isinstance(v, str) and v == ""]
    labels = ["Unnamed: %d" % i if i in unnamed else v for i, v in enumerate(header)]
    counts: Dict[Any, int] = {}
    for i in [i for i in range(len(labels)) if i not in unnamed] + unnamed:
        base = label = labels[i]
        n = counts.get(base, 0)
        while n > 0:
            counts[base] = n + 1
            label = "%s.%d" % (base, n)
            n = n + 1 if label in labels else counts.get(label, 0)
        labels[i] = label
        counts[label] = n + 1
    return labels


def _as_number(v: Any) -> Any:
    """A cell as pandas' numeric conversion sees it: NA, a bool, an int, a float, or None
    when the column cannot be numeric."""
    if _is_na(v):
        return NA
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        m = _NUMBER.fullmatch(v)
        if m:
            return int(v) if m.group(1) is not None else float(v.strip().lower())
    return None


def _numeric(vals: List[Any]) -> Optional[Tuple[str, List[Any]]]:
    """pandas' numeric conversion: booleans count as numbers; booleans alone stay bool."""
    nums = [_as_number(v) for v in vals]
    if any(n is None for n in nums):
        return None
    kinds = {type(n) for n in nums}
    if kinds == {bool}:
        return "bool", nums
    if float in kinds or _Missing in kinds:
        return "float", [NA if n is NA else float(n) for n in nums]
    return "int", [int(n) for n in nums]


def _bool_like(v: Any) -> bool:
    return isinstance(v, bool) or (isinstance(v, str) and (v in _TRUE or v in _FALSE))


def _column(vals: List[Any]) -> Tuple[str, List[Any]]:
    """A data column's dtype and values as pandas infers them: numeric, else its NA strings
    made NA, "True"/"false"... made booleans when every value is one (a bool column, or an
    object one when there are blanks), datetimes (or timedeltas) with blanks a datetime
    column, anything else an object column."""
    if not vals:
        return "object", []
    num = _numeric(vals)
    if num is not None:
        return num
    vals = [NA if _is_na(v) else v for v in vals]
    if all(v is NA or _bool_like(v) for v in vals):
        bools = [v if v is NA or isinstance(v, bool) else v in _TRUE for v in vals]
        return ("object" if NA in bools else "bool"), bools
    for kind in (datetime.datetime, datetime.timedelta):
        if all(v is NA or isinstance(v, kind) for v in vals):
            return kind.__name__, vals
    return "object", vals


def _np_round(x: float, digits: int) -> float:
    """numpy's round: scale, round half to even, scale back."""
    if not math.isfinite(x):
        return x
    if digits >= 0:
        scale = 10.0 ** digits
        y = x * scale
        return float(round(y)) / scale if math.isfinite(y) else x
    scale = 10.0 ** -digits
    return float(round(x / scale)) * scale


def _frame(ref: Ref, digits: int) -> Optional[Tuple[Any, ...]]:
    """The sheet as a comparable value: labels, row count, (dtype, values) per column."""
    ws = ref[0].values(ref[1])
    if ws is None:
        return None
    rows = _sheet_rows(ws)
    if not rows:
        return (), 0, ()
    labels = tuple(NA if _is_na(v) and not isinstance(v, str) else v for v in _labels(rows[0]))
    cols = []
    for i in range(len(labels)):
        dtype, vals = _column([row[i] for row in rows[1:]])
        if dtype == "float":
            vals = [v if v is NA else _np_round(v, digits) for v in vals]
        cols.append((dtype, tuple(NA if v is NA else v for v in vals)))
    return labels, len(rows) - 1, tuple(cols)


def _rule_sheet_data(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    digits = int(rule.get("precision", 4))
    first = _frame(_resolve(rule["sheet_idx0"], r, e), digits)
    if first is None:
        return False
    return first == _frame(_resolve(rule["sheet_idx1"], r, e), digits)


def _rule_sheet_name(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    return r.names() == e.names()


# ---- sheet_print: the sheets as LibreOffice printed them to <book>-<sheet>.csv
def _csv_lines(ref: Ref) -> Optional[List[str]]:
    """The CSV's lines stripped, last to first, trailing blank lines dropped (as upstream)."""
    book, name = ref
    if not book.path:
        return None
    try:
        with open("%s-%s.csv" % (os.path.splitext(book.path)[0], name), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines = (ln.strip() for ln in reversed(text.splitlines()))
    return list(itertools.dropwhile(lambda ln: not ln, lines))


def _rule_sheet_print(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    first = _csv_lines(_resolve(rule["sheet_idx0"], r, e))
    if first is None:
        return False
    second = _csv_lines(_resolve(rule["sheet_idx1"], r, e))
    if second is not None and rule.get("ignore_case", False):
        first, second = [ln.lower() for ln in first], [ln.lower() for ln in second]
    return first == second


# ---- sheet_fuzzy: cell ranges compared as text
def _normalized(value: str, rl: Mapping[str, Any]) -> str:
    for old, new in rl.get("normalization", []):
        value = value.replace(old, new)
    if "trim_leadings" in rl:
        value = value.lstrip(rl["trim_leadings"])
    if "trim_trailings" in rl:
        value = value.rstrip(rl["trim_trailings"])
    if "ignore_chars" in rl:
        value = "".join(ch for ch in value if ch not in set(rl["ignore_chars"]))
    return value.lower() if rl.get("ignore_case", False) else value


_FUZZY: Dict[str, Callable[[str, str, Mapping[str, Any]], bool]] = {
    "includes": lambda a, b, rl: b in a,
    "included_by": lambda a, b, rl: a in b,
    "fuzzy_match": lambda a, b, rl: fuzz_ratio(a, b) >= rl.get("threshold", 85.0),
    "exact_match": lambda a, b, rl: a == b,
}


def _coordinates(ranges: Any) -> List[str]:
    letter = _openpyxl().utils.get_column_letter
    multi = need("openpyxl.worksheet.cell_range", "python3-openpyxl", "compare_table")
    return [letter(col) + str(row)
            for rng in multi.MultiCellRange(ranges) for row, col in rng.cells]


def _rule_sheet_fuzzy(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    (b1, s1), (b2, s2) = _resolve(rule["sheet_idx0"], r, e), _resolve(rule["sheet_idx1"], r, e)
    for rl in rule["rules"]:
        same = _FUZZY.get(rl.get("type"))
        if same is None:
            raise _fail("sheet_fuzzy: match type `%s` is not one of %s"
                        % (rl.get("type"), ", ".join(sorted(_FUZZY))))
        for coord in _coordinates(rl["range"]):
            a = _normalized(str(b1.cell_value(s1, coord)), rl)
            b = _normalized(str(b2.cell_value(s2, coord)), rl)
            if not same(a, b, rl):
                return False
    return True


# ---- sparkline: {"F3": "Sheet1!C3:E3"} from the sheet's x14 extension
def _sparklines(ref: Ref) -> Dict[Optional[str], Optional[str]]:
    root = ref[0].sheet_xml(ref[1])
    if root is None:
        return {}
    out = {}
    for sp in root.iter(_X14 + "sparkline"):
        sqref, f = sp.find(_XM + "sqref"), sp.find(_XM + "f")
        out[None if sqref is None else sqref.text] = None if f is None else f.text
    return out


def _rule_sparkline(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    return (_sparklines(_resolve(rule["sheet_idx0"], r, e))
            == _sparklines(_resolve(rule["sheet_idx1"], r, e)))


# ---- chart: per series list, the asked properties
def _ref_formula(data: Any) -> str:
    for kind in ("numRef", "strRef"):
        if hasattr(data, kind) and hasattr(getattr(data, kind), "f"):
            return "%s" % getattr(data, kind).f
    return ""


def _title(title: Any) -> Any:
    try:
        return title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _anchor(ch: Any) -> List[Any]:
    # upstream's list: its second row is the end row again, not the start row
    a = ch.anchor
    return [a.editAs, a._from.col, a.to.row, a.to.col, a.to.row]


_CHART_PROPS: Dict[str, Callable[[Any], Any]] = {
    "title": lambda ch: _title(ch.title),
    "legend": lambda ch: ch.legend.position if ch.legend is not None else None,
    "anchor": _anchor,
    "width": lambda ch: ch.width,
    "height": lambda ch: ch.height,
    "type": lambda ch: ch.tagname,
    "direction": lambda ch: getattr(ch, "barDir", None),
    "xtitle": lambda ch: _title(getattr(ch.x_axis, "title", None)),
    "ytitle": lambda ch: _title(getattr(ch.y_axis, "title", None)),
    "ztitle": lambda ch: _title(getattr(getattr(ch, "z_axis", None), "title", None)),
}


def _charts(ref: Ref, props: Sequence[str]) -> Dict[str, Any]:
    ws = ref[0].sheet(ref[1])
    if ws is None:
        return {}
    out = {}
    for ch in ws._charts:
        series = ";".join("%s,%s" % (_ref_formula(s.val), _ref_formula(s.cat)) for s in ch.series)
        out[series] = {p: _CHART_PROPS[p](ch) for p in props if p in _CHART_PROPS}
    return out


def _rule_chart(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    props = list(rule.get("chart_props", []))
    return (_charts(_resolve(rule["sheet_idx0"], r, e), props)
            == _charts(_resolve(rule["sheet_idx1"], r, e), props))


# ---- cell styles (check_cell and style)
def _when_value(get: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda c: get(c) if c.value is not None else None


_STYLES: Dict[str, Callable[[Any], Any]] = {
    "number_format": lambda c: c.number_format if c.value is not None and c.data_type == "n"
    else None,
    "font_name": _when_value(lambda c: c.font.name),
    "font_family": _when_value(lambda c: c.font.family),
    "font_color": _when_value(lambda c: c.font.color.rgb),
    "font_bold": _when_value(lambda c: c.font.bold),
    "font_italic": _when_value(lambda c: c.font.italic),
    "font_underline": _when_value(lambda c: c.font.underline),
    "font_size": _when_value(lambda c: c.font.size),
    "fill_type": lambda c: c.fill.tagname,
    "bgcolor": lambda c: c.fill.fgColor.rgb,
    "fgcolor": lambda c: c.fill.fgColor.rgb,
    "hyperlink": _when_value(lambda c: c.hyperlink or ""),
    "merge": lambda c: type(c).__name__ == "MergedCell",
}


def _style(prop: str, cell: Any) -> Any:
    get = _STYLES.get(prop)
    if get is None:
        raise _fail("cell property `%s` is not one of value, %s" % (prop, ", ".join(_STYLES)))
    try:
        return get(cell)
    except (AttributeError, TypeError):
        return None


def _styles(ref: Ref, props: Sequence[str]) -> Dict[str, List[Any]]:
    ws = ref[0].sheet(ref[1])
    if ws is None:
        return {}
    if any(cf.rules for cf in ws.conditional_formatting):
        raise _fail("rule `style` on sheet %r, which has conditional formatting: not supported "
                    "by sbx (upstream evaluates the formatting rules' formulas)" % ref[1])
    return {c.coordinate: [_style(p, c) for p in props] for col in ws.iter_cols() for c in col}


def _rule_style(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    props = list(rule.get("props", []))
    return (_styles(_resolve(rule["sheet_idx0"], r, e), props)
            == _styles(_resolve(rule["sheet_idx1"], r, e), props))


def _rule_check_cell(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    book, name = _resolve(rule["sheet_idx"], r, e)
    ws = book.sheet(name)
    if ws is None:
        return False
    try:
        cell = ws[rule["coordinate"]]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    for prop, m in rule["props"].items():
        value = book.cell_value(name, rule["coordinate"]) if prop == "value" else _style(prop, cell)
        if not match(value, m):
            return False
    return True


# ---- sheet settings
def _ref_sheet(ref: Ref) -> Any:
    return ref[0].sheet(ref[1])


def _two_sheets(rule: Mapping[str, Any], r: _Book, e: _Book) -> Tuple[Any, Any]:
    return (_ref_sheet(_resolve(rule["sheet_idx0"], r, e)),
            _ref_sheet(_resolve(rule["sheet_idx1"], r, e)))


def _rule_freeze(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    first, second = _two_sheets(rule, r, e)
    return first is not None and second is not None and (
        first.freeze_panes == second.freeze_panes)


def _one_sheet(rule: Mapping[str, Any], r: _Book, e: _Book) -> Any:
    return _ref_sheet(_resolve(rule["sheet_idx"], r, e))


def _rule_zoom(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    ws = _one_sheet(rule, r, e)
    return ws is not None and match(ws.sheet_view.zoomScale or 100.0, rule)


def _attr(obj: Any, name: str, what: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise _fail("%s has no property `%s`" % (what, name))


def _rule_data_validation(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    """As many validations as `dv_props` entries at least, and each validation matching all
    the rules of some entry."""
    ws = _one_sheet(rule, r, e)
    if ws is None:
        return False
    found, wanted = ws.data_validations.dataValidation, rule["dv_props"]
    return len(found) >= len(wanted) and all(
        any(all(match(_attr(dv, a, "a data validation"), m) for a, m in props.items())
            for props in wanted)
        for dv in found)


def _dimensions(ref: Ref, kind: str, props: Sequence[str]) -> Dict[Any, Dict[str, Any]]:
    ws = ref[0].sheet(ref[1])
    if ws is None:
        return {}
    dims = ws.row_dimensions if kind == "row" else ws.column_dimensions
    return {key: {p: _attr(d, p, "a %s" % kind) for p in props} for key, d in dims.items()}


def _rule_dims(kind: str) -> Callable[[Mapping[str, Any], _Book, _Book], bool]:
    def check(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
        props = list(rule.get("props", []))
        return (_dimensions(_resolve(rule["sheet_idx0"], r, e), kind, props)
                == _dimensions(_resolve(rule["sheet_idx1"], r, e), kind, props))
    return check


def _filter_column(fc: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"col_id": fc.colId, "hidden_button": fc.hiddenButton,
                           "show_button": fc.showButton}
    if fc.filters is not None:
        out["filters_blank"] = fc.filters.blank
        out["filters"] = set(fc.filters.filter)
    if fc.customFilters is not None:
        out["custom_filters_op"] = fc.customFilters._and
        out["custom_filters"] = {(f.operator, f.val) for f in fc.customFilters.customFilter}
    return out


def _sort_state(ss: Any) -> Dict[str, Any]:
    return {"sort": ss.columnSort, "case": ss.caseSensitive, "method": ss.sortMethod,
            "ref": ss.ref,
            "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref,
                           "custom_list": c.customList, "dxf_id": c.dxfId, "icon": c.iconSet,
                           "iconid": c.iconId} for c in ss.sortCondition]}


def _filters(ref: Ref) -> Dict[str, Any]:
    ws = ref[0].sheet(ref[1])
    if ws is None:
        return {}
    af = ws.auto_filter
    out: Dict[str, Any] = {"ref": af.ref, "filter_column": sorted(
        (_filter_column(fc) for fc in af.filterColumn), key=lambda d: d["col_id"])}
    if af.sortState is not None:
        out["sort_state"] = _sort_state(af.sortState)
    return out


def _rule_filter(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    return (_filters(_resolve(rule["sheet_idx0"], r, e))
            == _filters(_resolve(rule["sheet_idx1"], r, e)))


# ---- pivot_table: per source range, the asked properties
def _trimmed_selection(pvt: Any) -> Tuple[List[List[Tuple[Any, int]]], int, int]:
    raw = [[(i.h, i.x) for i in f.items if i.x is not None] for f in pvt.pivotFields]
    left = len(list(itertools.takewhile(lambda s: not s, raw)))
    rest = raw[left:]
    right = len(list(itertools.takewhile(lambda s: not s, reversed(rest))))
    return rest[:len(rest) - right], left, right


def _pivot_source(pvt: Any, left: int, right: int) -> str:
    utils = _openpyxl().utils
    src = pvt.cache.cacheSource
    if src.worksheetSource is None or not src.worksheetSource.ref:
        raise _fail("pivot_table: a pivot table whose source is not a sheet range")
    a, b = src.worksheetSource.ref.split(":")
    (r1, c1), (r2, c2) = utils.coordinate_to_tuple(a), utils.coordinate_to_tuple(b)
    return "%s;%s:%s;%s" % (src.type, (r1, c1 + left), (r2, c2 - right), src.worksheetSource.sheet)


def _pivot(pvt: Any, props: Sequence[str]) -> Tuple[str, Dict[str, Any]]:
    sel, left, right = _trimmed_selection(pvt)
    simple = {"name": "name", "show_total": "visualTotals", "show_empty_row": "showEmptyRow",
              "show_empty_col": "showEmptyCol", "show_headers": "showHeaders",
              "location": "location"}
    info = {p: getattr(pvt, a) for p, a in simple.items() if p in props}
    if "filter" in props or "selection" in props:
        info["selection"] = sel if "ordered" in props else [set(s) for s in sel]
    if "filter" in props:
        info["filter_fields"] = {f.fld for f in pvt.pageFields}
    if "col_fields" in props:
        info["col_fields"] = [f.x - left for f in pvt.colFields]
    if "row_fields" in props:
        info["row_fields"] = [f.x - left for f in pvt.rowFields]
    if "data_fields" in props:
        named = "data_fields_name" in props
        info["data_fields"] = ["%d;%s;%s;%s" % (f.fld - left, f.name if named else "",
                                                f.subtotal, f.showDataAs)
                               for f in pvt.dataFields]
    return _pivot_source(pvt, left, right), info


def _pivots(ref: Ref, props: Sequence[str]) -> Dict[str, Any]:
    ws = ref[0].sheet(ref[1])
    return {} if ws is None else dict(_pivot(p, props) for p in ws._pivots)


def _rule_pivot_table(rule: Mapping[str, Any], r: _Book, e: _Book) -> bool:
    props = set(rule.get("pivot_props", []))
    return (_pivots(_resolve(rule["sheet_idx0"], r, e), props)
            == _pivots(_resolve(rule["sheet_idx1"], r, e), props))


# ---- upstream's _match_value_to_rule: {"method": ..., "ref": ...}
def _compare(op: Callable[[Any, Any], Any], a: Any, b: Any) -> bool:
    try:
        return bool(op(a, b))
    except TypeError:
        return False


def _match_range(value: Any, ref: Any) -> bool:
    multi = need("openpyxl.worksheet.cell_range", "python3-openpyxl", "compare_table")
    inner, outer = multi.MultiCellRange(ref[0]), multi.MultiCellRange(ref[1])
    return all(x in value for x in inner) and all(x in outer for x in value)


def match(value: Any, rule: Mapping[str, Any]) -> bool:
    """`re[.FLAG...]` (re.search of ref), eq/ne/le/lt/ge/gt, `approx:T` (|value - ref| <= T),
    `spreadsheet_range` (ref[0] inside value inside ref[1]), `range.XY` (X, Y: t strict, e not:
    ref[0] <X value <Y ref[1]), `str_list_eq`/`str_set_eq` (value split on commas)."""
    method, ref = str(rule["method"]), rule.get("ref")
    if method.startswith("re"):
        try:
            flags = functools.reduce(operator.or_, (getattr(re, f) for f in method.split(".")[1:]),
                                     re.RegexFlag(0))
        except AttributeError:
            raise _fail("unknown regular expression flag in `%s`" % method)
        return _compare(lambda v, p: re.search(p, v, flags), value, ref)
    if method in ("eq", "ne", "le", "lt", "ge", "gt"):
        return _compare(getattr(operator, method), value, ref)
    if method.startswith("approx:"):
        try:
            return abs(float(value) - ref) <= float(method.split(":")[1])
        except (ValueError, TypeError):
            return False
    if method == "spreadsheet_range":
        return _match_range(value, ref)
    if method.startswith("range.") and len(method) == 8 and set(method[6:]) <= {"t", "e"}:
        low, high = getattr(operator, "l" + method[6]), getattr(operator, "l" + method[7])
        return _compare(low, ref[0], value) and _compare(high, value, ref[1])
    if method in ("str_list_eq", "str_set_eq"):
        kind = list if method == "str_list_eq" else set
        return kind(str(value).strip("\"'").split(",")) == kind(ref)
    raise _fail("match method `%s` is not supported" % method)


RULES: Dict[str, Callable[[Mapping[str, Any], _Book, _Book], bool]] = {
    "sheet_name": _rule_sheet_name, "sheet_data": _rule_sheet_data,
    "sheet_print": _rule_sheet_print, "sheet_fuzzy": _rule_sheet_fuzzy,
    "sparkline": _rule_sparkline, "chart": _rule_chart, "style": _rule_style,
    "freeze": _rule_freeze, "zoom": _rule_zoom, "data_validation": _rule_data_validation,
    "row_props": _rule_dims("row"), "col_props": _rule_dims("column"),
    "filter": _rule_filter, "pivot_table": _rule_pivot_table, "check_cell": _rule_check_cell,
}


def _load(path: str) -> Any:
    return _openpyxl().load_workbook(filename=path)


def _checked_rules(options: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    rules = options.get("rules")
    if not isinstance(rules, list):
        raise _fail("options.rules must be a list of rules")
    for rule in rules:
        if rule.get("type") not in RULES:
            raise _fail("rule type `%s` is not supported by sbx (have: %s)"
                        % (rule.get("type"), ", ".join(sorted(RULES))))
    return rules


def compare_table(result: Optional[str], expected: Optional[str] = None,
                  **options: Any) -> float:
    """1.0 when every rule of options.rules holds, else 0.0 (upstream stops at the first
    failing one). A result that is missing or that openpyxl cannot open scores 0; an
    expected file that cannot be opened fails the evaluation."""
    rules = _checked_rules(options)
    if result is None or not os.path.exists(result):
        return 0.0
    _openpyxl()  # a missing module fails the evaluation, not the result's load
    try:
        r = _Book(result, _load(result))
    except Exception:  # upstream: any load failure of the result scores 0
        return 0.0
    e = _Book(None, None)
    if expected is not None:
        try:
            e = _Book(expected, _load(expected))
        except Exception as ex:
            raise _fail("cannot open the expected file %s: %s" % (expected, ex))
    try:
        return float(all(RULES[rule["type"]](rule, r, e) for rule in rules))
    finally:
        r.close()
        e.close()
