#!/usr/bin/env python3
"""OSWorld's office metrics in sbx.desktop_env (compare_images, compare_docx_files,
compare_table) on real files that the test makes with Pillow, python-docx and openpyxl:
equal files score 1, different ones 0, a missing file 0, the options and rule types as upstream
has them, and what sbx does not support fails naming it. Needs Debian's python3-pil,
python3-numpy, python3-docx and python3-openpyxl (exit 77 without them).

  /usr/bin/python3 test_metrics_office.py
"""
import datetime
import os
import shutil
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import docx
    import numpy
    import openpyxl
    from openpyxl.chart import BarChart, Reference
    from openpyxl.formatting.rule import CellIsRule
    from openpyxl.styles import Font, PatternFill
    from openpyxl.worksheet.datavalidation import DataValidation
    from PIL import Image, ImageDraw
except ImportError as e:
    print("SKIP: %s (scripts/deps.sh installs Debian's python3-pil python3-numpy "
          "python3-docx python3-openpyxl)" % e)
    sys.exit(77)

from sbx.desktop_env import EvaluationError  # noqa: E402
from sbx.desktop_env import evaluate, office, table  # noqa: E402

TMP = ""


def path(name):
    return os.path.join(TMP, name)


# ---- files
def image(name, size=(64, 48), shapes=(), bg=255):
    im = Image.new("RGB", size, (bg, bg, bg))
    d = ImageDraw.Draw(im)
    for box, colour in shapes:
        d.rectangle(box, fill=colour)
    im.save(path(name))
    return path(name)


def word(name, paragraphs):
    doc = docx.Document()
    for p in paragraphs:
        doc.add_paragraph(p)
    doc.save(path(name))
    return path(name)


def odt(name, body):
    """A minimal OpenDocument text file whose body is `body` (text:p elements)."""
    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"')
    with zipfile.ZipFile(path(name), "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", '<?xml version="1.0"?><office:document-content %s>'
                   '<office:body><office:text>%s</office:text></office:body>'
                   '</office:document-content>' % (ns, body))
    return path(name)


def workbook(name, rows, sheet="Sheet1", extra=None, more=()):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = sheet
    for row in rows:
        ws.append(row)
    for title in more:
        wb.create_sheet(title).append(["other", title])
    if extra:
        extra(ws)
    wb.save(path(name))
    return path(name)


DATA = [["Name", "Score", "When"], ["ann", 1.23456, datetime.datetime(2024, 5, 1)],
        ["bob", 2, datetime.datetime(2024, 5, 2)]]


def rules(*rs):
    return {"rules": list(rs)}


SHEET_DATA = {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}


class Images(unittest.TestCase):
    def test_equal_different_missing(self):
        a = image("a.png", shapes=[((5, 5, 30, 30), (200, 0, 0))])
        b = image("b.png", shapes=[((5, 5, 30, 30), (200, 0, 0))])
        self.assertEqual(office.compare_images(a, b), 1.0)
        black, white = image("black.png", bg=0), image("white.png", bg=255)
        self.assertLess(office.compare_images(black, white), 0.01)
        moved = image("moved.png", shapes=[((30, 10, 60, 40), (200, 0, 0))])
        self.assertLess(office.compare_images(a, moved), 0.9)
        self.assertEqual(office.compare_images(a, path("no-such.png")), 0)
        self.assertEqual(office.compare_images(None, b), 0)
        with open(path("not-an-image.png"), "w") as f:
            f.write("text")
        self.assertEqual(office.compare_images(a, path("not-an-image.png")), 0)

    def test_sizes_and_reference_base(self):
        a = image("big.png", size=(128, 96), shapes=[((10, 10, 60, 60), (0, 0, 0))])
        small = image("small.png", size=(64, 48), shapes=[((5, 5, 30, 30), (0, 0, 0))])
        self.assertGreater(office.compare_images(a, small), 0.9, "resized to the smaller")
        b = image("b2.png", shapes=[((5, 5, 30, 30), (0, 0, 0))])
        c = image("c2.png", shapes=[((5, 5, 31, 30), (0, 0, 0))])
        raw = office.compare_images(b, c)
        self.assertTrue(0.9 < raw < 1.0, raw)
        got = office.compare_images(b, c, reference_base_result=0.5)
        self.assertAlmostEqual(got, (raw - 0.5) / 0.5)
        self.assertEqual(office.compare_images(b, c, reference_base_result=raw), 0.0,
                         "not 0.01 above the base")

    def test_ssim_of_known_arrays(self):
        x = numpy.arange(100, dtype=numpy.uint8).reshape(10, 10)
        self.assertAlmostEqual(office.ssim(x, x, numpy), 1.0)
        self.assertLess(office.ssim(x, 255 - x, numpy), 0)


class Docs(unittest.TestCase):
    def test_equal_different_missing(self):
        a = word("a.docx", ["Hello  world", "second"])
        self.assertEqual(office.compare_docx_files(a, word("b.docx", ["Hello world",
                                                                     "second"])), 1.0)
        self.assertEqual(office.compare_docx_files(a, word("c.docx", ["Hello", "other"])), 0.0)
        self.assertEqual(office.compare_docx_files(a, path("none.docx")), 0.0)
        self.assertEqual(office.compare_docx_files(None, a), 0.0)
        self.assertEqual(office.compare_docx_files(a, odt("a.odt", "<text:p>x</text:p>")), 0.0)

    def test_options(self):
        a = word("o1.docx", ["One", "", "Two"])
        b = word("o2.docx", ["two", "one"])
        cmp = office.compare_docx_files
        self.assertEqual(cmp(a, b), 0.0)
        self.assertEqual(cmp(a, b, ignore_case=True, ignore_order=True), 1.0,
                         "blanks ignored: the empty paragraph is only whitespace")
        self.assertEqual(cmp(a, b, ignore_blanks=False, ignore_case=True, ignore_order=True),
                         0.0, "3 paragraphs against 2")
        self.assertEqual(cmp(a, b, ignore_blanks=False, ignore_case=True, ignore_order=True,
                             delete_empty_lines=True), 1.0)
        c = word("o3.docx", ["One", "", "Tw0"])
        self.assertAlmostEqual(cmp(a, c, fuzzy_match=True), office.fuzz_ratio("One Two",
                                                                              "One Tw0") / 100)
        self.assertAlmostEqual(cmp(a, c, ignore_blanks=False, fuzzy_match=True),
                               (1 + 1 + 2 / 3) / 3)
        self.assertAlmostEqual(cmp(a, c, content_only=True, ignore_blanks=False), 6 / 7)

    def test_run_text_as_python_docx_1(self):
        doc = docx.Document()
        p = doc.add_paragraph("a")
        run = p.add_run("b")
        run.add_break()  # a line break is "\n"
        run.add_text("c")
        doc.save(path("breaks.docx"))
        self.assertEqual(office._docx_paragraphs(path("breaks.docx")), ["ab\nc"])
        self.assertEqual(office.compare_docx_files(path("breaks.docx"),
                                                   word("flat.docx", ["ab c"])), 1.0)

    def test_odt(self):
        a = odt("a1.odt", '<text:p>Hello <text:span>big</text:span> world</text:p>'
                          '<text:h>heading</text:h><text:p/>')
        self.assertEqual(office._odt_paragraphs(a), ["Hello big world", ""])
        b = odt("b1.odt", "<text:p>Hello big world</text:p>")
        self.assertEqual(office.compare_docx_files(a, b), 1.0)
        self.assertEqual(office.compare_docx_files(a, b, ignore_blanks=False), 0.0)
        self.assertEqual(office.compare_docx_files(a, odt("c1.odt", "<text:p>bye</text:p>")),
                         0.0)

    def test_fuzz_ratio(self):
        self.assertAlmostEqual(office.fuzz_ratio("this is a test", "this is a test!"),
                               96.5517241379, places=6)
        self.assertAlmostEqual(office.fuzz_ratio("fuzzy wuzzy was a bear",
                                                 "wuzzy fuzzy was a bear"), 90.9090909, places=5)
        self.assertEqual((office.fuzz_ratio("", ""), office.fuzz_ratio("a", "")), (100.0, 0.0))


class Tables(unittest.TestCase):
    def test_sheet_data(self):
        a = workbook("t1.xlsx", DATA)
        self.assertEqual(table.compare_table(a, workbook("t2.xlsx", DATA),
                                             **rules(SHEET_DATA)), 1.0)
        changed = [list(r) for r in DATA]
        changed[2][0] = "bo"
        self.assertEqual(table.compare_table(a, workbook("t3.xlsx", changed),
                                             **rules(SHEET_DATA)), 0.0)
        self.assertEqual(table.compare_table(path("none.xlsx"), a, **rules(SHEET_DATA)), 0.0)
        self.assertEqual(table.compare_table(None, a, **rules(SHEET_DATA)), 0.0)
        with open(path("bad.xlsx"), "w") as f:
            f.write("not a workbook")
        self.assertEqual(table.compare_table(path("bad.xlsx"), a, **rules(SHEET_DATA)), 0.0)
        self.assertEqual(table.compare_table(a, a, **rules(dict(SHEET_DATA, sheet_idx1="EI5"))),
                         0.0, "a sheet that is not there")

    def test_sheet_data_precision_and_dtypes(self):
        near = [list(r) for r in DATA]
        near[1][1] = 1.23459  # 1.2346 both at 4 decimals
        a, b = workbook("p1.xlsx", DATA), workbook("p2.xlsx", near)
        self.assertEqual(table.compare_table(a, b, **rules(SHEET_DATA)), 1.0)
        self.assertEqual(table.compare_table(a, b, **rules(dict(SHEET_DATA, precision=5))), 0.0)
        as_text = [list(r) for r in DATA]
        as_text[2][1] = "2"  # a number typed as text: pandas reads the column as numbers
        self.assertEqual(table.compare_table(a, workbook("p3.xlsx", as_text),
                                             **rules(SHEET_DATA)), 1.0)
        blank = [list(r) for r in DATA] + [["", None, None]]
        self.assertEqual(table.compare_table(a, workbook("p4.xlsx", blank),
                                             **rules(SHEET_DATA)), 1.0, "trailing empty row")
        ints = [["n"], [1], [2]]
        floats = [["n"], [1.0], [2.5]]
        self.assertEqual(table.compare_table(workbook("p5.xlsx", ints), workbook(
            "p6.xlsx", [["n"], [1.0], [2.0]]), **rules(SHEET_DATA)), 1.0, "2.0 reads as 2")
        self.assertEqual(table.compare_table(workbook("p7.xlsx", ints), workbook(
            "p8.xlsx", floats), **rules(SHEET_DATA)), 0.0)

    def test_sheet_refs_and_names(self):
        a = workbook("n1.xlsx", DATA, more=["Two"])
        b = workbook("n2.xlsx", DATA, more=["Two"])
        c = workbook("n3.xlsx", DATA, more=["Three"])
        self.assertEqual(table.compare_table(a, b, **rules({"type": "sheet_name"})), 1.0)
        self.assertEqual(table.compare_table(a, c, **rules({"type": "sheet_name"})), 0.0)
        r = {"type": "sheet_data", "sheet_idx0": "RNTwo", "sheet_idx1": "EI1"}
        self.assertEqual(table.compare_table(a, b, **rules(r)), 1.0)
        self.assertEqual(table.compare_table(a, c, **rules(r)), 0.0)
        r = {"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "ENSheet1"}
        self.assertEqual(table.compare_table(a, c, **rules(r)), 1.0)
        with self.assertRaises(EvaluationError):
            table.compare_table(a, b, **rules(dict(r, sheet_idx0="XX0")))

    def test_sheet_print(self):
        a, b = workbook("pr1.xlsx", DATA), workbook("pr2.xlsx", DATA)
        for name, text in (("pr1-Sheet1.csv", "Name,Score\nann,1\n\n"),
                           ("pr2-Sheet1.csv", "name,score \nANN,1\n")):
            with open(path(name), "w") as f:
                f.write(text)
        r = {"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"}
        self.assertEqual(table.compare_table(a, b, **rules(r)), 0.0)
        self.assertEqual(table.compare_table(a, b, **rules(dict(r, ignore_case=True))), 1.0)
        os.remove(path("pr1-Sheet1.csv"))
        self.assertEqual(table.compare_table(a, b, **rules(dict(r, ignore_case=True))), 0.0)

    def test_sheet_fuzzy(self):
        a = workbook("f1.xlsx", [["12 Main Rd"], ["(555) 1234"]])
        b = workbook("f2.xlsx", [["12 main road"], ["555 1234"]])
        r = {"type": "sheet_fuzzy", "sheet_idx0": 0, "sheet_idx1": "EI0", "rules": [
            {"range": ["A1:A1"], "type": "exact_match", "ignore_case": True,
             "normalization": [["Rd", "Road"]]},
            {"range": ["A2"], "type": "exact_match", "ignore_chars": "()"}]}
        self.assertEqual(table.compare_table(a, b, **rules(r)), 1.0)
        r["rules"][1]["ignore_chars"] = "("
        self.assertEqual(table.compare_table(a, b, **rules(r)), 0.0)
        r["rules"] = [{"range": ["A1:A2"], "type": "fuzzy_match", "threshold": 70}]
        self.assertEqual(table.compare_table(a, b, **rules(r)), 1.0)
        r["rules"] = [{"range": ["A1"], "type": "includes"}]
        self.assertEqual(table.compare_table(a, b, **rules(r)), 0.0)
        r["rules"] = [{"range": ["A1"], "type": "sounds_like"}]
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(a, b, **rules(r))
        self.assertIn("sounds_like", str(e.exception))

    def test_check_cell(self):
        def bold(ws):
            ws["B2"].font = Font(bold=True, name="DejaVu Sans")
        a = workbook("c1.xlsx", DATA, extra=bold)
        ok = {"type": "check_cell", "sheet_idx": 0, "coordinate": "B2", "props": {
            "value": {"method": "approx:0.001", "ref": 1.2346},
            "font_bold": {"method": "eq", "ref": True},
            "font_name": {"method": "re.I", "ref": "^dejavu"}}}
        self.assertEqual(table.compare_table(a, None, **rules(ok)), 1.0)
        self.assertEqual(table.compare_table(workbook("c2.xlsx", DATA), None, **rules(ok)), 0.0)
        text = {"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": "A3",
                "props": {"value": {"method": "str_set_eq", "ref": ["bob"]}}}
        self.assertEqual(table.compare_table(a, None, **rules(text)), 1.0)
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(a, None, **rules(dict(ok, props={"shadow": {
                "method": "eq", "ref": 1}})))
        self.assertIn("shadow", str(e.exception))
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(a, None, **rules(dict(ok, props={"value": {
                "method": "about", "ref": 1}})))
        self.assertIn("about", str(e.exception))

    def test_sheet_settings(self):
        def settings(ws):
            ws.freeze_panes = "B2"
            ws.sheet_view.zoomScale = 150
            ws.row_dimensions[2].height = 30
            ws.column_dimensions["B"].width = 20
            ws.auto_filter.ref = "A1:C3"
            dv = DataValidation(type="list", formula1='"ann,bob"')
            dv.add("A2:A3")
            ws.add_data_validation(dv)
        a = workbook("s1.xlsx", DATA, extra=settings)
        b = workbook("s2.xlsx", DATA, extra=settings)
        plain = workbook("s3.xlsx", DATA)
        two = {"sheet_idx0": 0, "sheet_idx1": "EI0"}
        for r in ({"type": "freeze"}, {"type": "row_props", "props": ["height"]},
                  {"type": "col_props", "props": ["width", "hidden"]}, {"type": "filter"}):
            r.update(two)
            self.assertEqual(table.compare_table(a, b, **rules(r)), 1.0, r)
            self.assertEqual(table.compare_table(a, plain, **rules(r)), 0.0, r)
        zoom = {"type": "zoom", "sheet_idx": 0, "method": "gt", "ref": 120}
        self.assertEqual(table.compare_table(a, None, **rules(zoom)), 1.0)
        self.assertEqual(table.compare_table(plain, None, **rules(zoom)), 0.0)
        dv = {"type": "data_validation", "sheet_idx": 0, "dv_props": [{
            "type": {"method": "eq", "ref": "list"},
            "formula1": {"method": "eq", "ref": '"ann,bob"'},
            "ranges": {"method": "spreadsheet_range", "ref": ["A2:A3", "A1:A10"]}}]}
        self.assertEqual(table.compare_table(a, None, **rules(dv)), 1.0)
        self.assertEqual(table.compare_table(plain, None, **rules(dv)), 0.0)
        dv["dv_props"][0]["ranges"]["ref"] = ["A1:A3", "A1:A10"]
        self.assertEqual(table.compare_table(a, None, **rules(dv)), 0.0)

    def test_style_and_chart(self):
        def styled(ws):
            ws["A1"].font = Font(bold=True)
            ws["B2"].fill = PatternFill("solid", fgColor="FFFF0000")
            ws["B2"].number_format = "0.00"

        def chart(ws):
            c = BarChart()
            c.add_data(Reference(ws, min_col=2, min_row=1, max_row=3), titles_from_data=True)
            c.set_categories(Reference(ws, min_col=1, min_row=2, max_row=3))
            c.title = "Scores"
            ws.add_chart(c, "E2")
        a, b = workbook("y1.xlsx", DATA, extra=styled), workbook("y2.xlsx", DATA, extra=styled)
        style = {"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0",
                 "props": ["font_bold", "bgcolor", "number_format"]}
        self.assertEqual(table.compare_table(a, b, **rules(style)), 1.0)
        self.assertEqual(table.compare_table(a, workbook("y3.xlsx", DATA), **rules(style)), 0.0)

        def conditional(ws):
            ws.conditional_formatting.add("B2:B3", CellIsRule(
                operator="greaterThan", formula=["1"], fill=PatternFill("solid",
                                                                       fgColor="FF00FF00")))
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(workbook("y4.xlsx", DATA, extra=conditional), b, **rules(style))
        self.assertIn("conditional formatting", str(e.exception))
        c1, c2 = workbook("h1.xlsx", DATA, extra=chart), workbook("h2.xlsx", DATA, extra=chart)
        ch = {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0",
              "chart_props": ["type", "title", "direction"]}
        self.assertEqual(table.compare_table(c1, c2, **rules(ch)), 1.0)
        self.assertEqual(table.compare_table(c1, a, **rules(ch)), 0.0)
        self.assertEqual(table._charts((table._Book(c1, openpyxl.load_workbook(c1)), "Sheet1"),
                                       ["type", "title"]),
                         {"'Sheet1'!$B$2:$B$3,'Sheet1'!$A$2:$A$3": {"type": "barChart",
                                                                    "title": "Scores"}})

    def test_rule_list_and_unknown_rules(self):
        a, b = workbook("u1.xlsx", DATA), workbook("u2.xlsx", DATA, more=["X"])
        self.assertEqual(table.compare_table(a, b, **rules(SHEET_DATA, {"type": "sheet_name"})),
                         0.0, "every rule must hold")
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(a, b, **rules({"type": "sheet_name"}, {"type": "hologram"}))
        self.assertIn("hologram", str(e.exception))
        with self.assertRaises(EvaluationError):
            table.compare_table(a, b)
        with self.assertRaises(EvaluationError) as e:
            table.compare_table(a, path("no-gold.xlsx"), **rules(SHEET_DATA))
        self.assertIn("no-gold.xlsx", str(e.exception))


class Wiring(unittest.TestCase):
    def test_registered_and_missing_modules_named(self):
        for name in ("compare_images", "compare_docx_files", "compare_table"):
            self.assertIn(name, evaluate.METRICS)
        with self.assertRaises(EvaluationError) as e:
            office.need("no_such_module_sbx", "python3-no-such", "compare_table")
        self.assertIn("python3-no-such", str(e.exception))
        self.assertIn("compare_table", str(e.exception))

    def test_a_missing_module_is_never_a_silent_0(self):
        xlsx, doc = workbook("m.xlsx", DATA), word("m.docx", ["x"])
        png = image("m.png")
        for module, package, call in (
                ("openpyxl", "python3-openpyxl",
                 lambda: table.compare_table(xlsx, xlsx, **rules(SHEET_DATA))),
                ("docx", "python3-docx", lambda: office.compare_docx_files(doc, doc)),
                ("PIL.Image", "python3-pil", lambda: office.compare_images(png, png)),
                ("numpy", "python3-numpy", lambda: office.compare_images(png, png))):
            saved = sys.modules.get(module)
            sys.modules[module] = None  # import raises ImportError
            try:
                with self.assertRaises(EvaluationError) as e:
                    call()
                self.assertIn(package, str(e.exception))
            finally:
                sys.modules[module] = saved


if __name__ == "__main__":
    TMP = tempfile.mkdtemp(prefix="sbx-metrics-office-")
    try:
        prog = unittest.main(argv=[sys.argv[0], "-v"], exit=False)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
