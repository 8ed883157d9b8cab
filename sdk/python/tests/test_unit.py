#!/usr/bin/env python3
"""The SDK's pieces that need no server: settings resolution, the event-stream parser, query
strings, error mapping, execution folding."""
import datetime
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sbx import _http, errors  # noqa: E402
from sbx.commands import consume  # noqa: E402


class Unit(unittest.TestCase):
    def test_resolve_defaults(self):
        old = dict(os.environ)
        try:
            for k in ("SBX_HOST", "SBX_API_KEY", "SBX_STATE_DIR"):
                os.environ.pop(k, None)
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "api-key"), "w") as f:
                    f.write("  file-key\n")
                os.environ["SBX_STATE_DIR"] = d
                self.assertEqual(_http.resolve(None, None), ("http://127.0.0.1:8080", "file-key"))
                os.environ["SBX_API_KEY"] = "env-key"
                os.environ["SBX_HOST"] = "example.test:9000/"
                self.assertEqual(_http.resolve(None, None), ("http://example.test:9000", "env-key"))
                self.assertEqual(_http.resolve("https://h", "k"), ("https://h", "k"))
        finally:
            os.environ.clear()
            os.environ.update(old)

    def test_sse_frames_split_anywhere(self):
        raw = (b'{"type":"init","text":"abc"}\n\n{"type":"stdout","text":"a"}\n\n'
               b'data: {"type":"stdout","text":"b"}\n\n{"type":"error","error":{"evalue":"7"}}\n\n')
        for size in (1, 3, 7, len(raw)):
            chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
            ex = consume(_http.iter_sse(chunks))
            self.assertEqual((ex.id, ex.stdout, ex.exit_code), ("abc", ["a", "b"], 7))

    def test_complete_and_results(self):
        ex = consume([{"type": "result", "results": {"text": "4"}},
                      {"type": "execution_complete", "execution_time": 3}])
        self.assertEqual((ex.exit_code, ex.results, ex.execution_time_ms), (0, [{"text": "4"}], 3))

    def test_query_string(self):
        q = _http._query_string([("path", "/a b"), ("path", "/c"), ("x", None), ("b", True)])
        self.assertEqual(q, "?path=%2Fa+b&path=%2Fc&b=true")
        self.assertEqual(_http._query_string({}), "")

    def test_error_classes(self):
        self.assertIsInstance(errors.from_status(404, "X", "m"), errors.NotFoundError)
        self.assertIsInstance(errors.from_status(409, "X", "m"), errors.ConflictError)
        self.assertIsInstance(errors.from_status(401, "X", "m"), errors.AuthError)
        e = errors.from_status(500, "C", "msg", "rid")
        self.assertEqual((e.code, e.message, e.status, e.request_id), ("C", "msg", 500, "rid"))

    def test_relative_time(self):
        from sbx.desktop_env import reltime
        from sbx.desktop_env.errors import EvaluationError
        now = datetime.datetime(2026, 11, 26, 10, 0)  # a Thursday
        one = reltime.resolve({"relativeTime": {"from": "tomorrow"}, "expected": {
            "time": "{DoW}, {MonthFull} {DayD}, {Year} ({Day0D}/{Month0D}, {month}, {Month})"}},
            now)
        self.assertEqual(one["expected"]["time"],
                         "Fri, November 27, 2026 (27/11, november, Nov)")
        rng = reltime.resolve({"relativeTime": {"from": "next Monday", "to": "next Friday"},
                               "expected": {"from": "{DayD}", "to": "{Month} {DayD}"}}, now)
        self.assertEqual(rng["expected"], {"from": "30", "to": "Dec 4"})
        self.assertEqual(reltime.day_for("this Sunday", now).day, 29)
        self.assertEqual(reltime.day_for("5th next month", datetime.datetime(2026, 12, 3)),
                         datetime.datetime(2027, 1, 5))
        self.assertEqual(reltime.day_for("first monday four months later", now),
                         datetime.datetime(2027, 3, 1))
        with self.assertRaises(EvaluationError):
            reltime.day_for("someday", now)

    def test_tab_metrics(self):
        from sbx.desktop_env import evaluate
        from sbx.desktop_env.chrome import compare_urls
        self.assertTrue(compare_urls("https://www.Example.com/", "https://example.com"))
        self.assertFalse(compare_urls("http://a.com/x?q=1", "http://a.com/x?q=2"))
        self.assertFalse(compare_urls("https://a.com/x", "https://a.com/y"))
        tabs = [{"url": "https://a.com/x"}, {"url": "http://b.org/"}]
        self.assertEqual(evaluate.is_expected_tabs(tabs, {"type": "url", "urls": [
            "http://b.org", "https://www.a.com/x"]}), 1.0)
        self.assertEqual(evaluate.is_expected_tabs(tabs, {"type": "url", "urls": [
            "https://a.com/x"]}), 0.0)
        self.assertEqual(evaluate.is_expected_tabs([], {"type": "url", "urls": []}), 0.0)
        self.assertEqual(evaluate.is_expected_active_tab({"url": "https://a.com/x"}, {
            "type": "url", "url": "https://a.com/x/"}), 0.0)
        self.assertEqual(evaluate.is_expected_active_tab("https://a.com/", {
            "type": "url", "url": "https://www.a.com"}), 1.0)

    def test_bad_url(self):
        with self.assertRaises(ValueError):
            _http.Transport("ftp://x", None)


if __name__ == "__main__":
    unittest.main()
