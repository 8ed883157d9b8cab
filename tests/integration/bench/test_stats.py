"""Known-answer tests for bench/lib/stats.py (percentiles, summaries, ratios, formatting)."""

import unittest

import stats


class Percentile(unittest.TestCase):
    def test_linear_interpolation_matches_numpy_default(self):
        xs = list(range(1, 11))  # numpy.percentile(range(1, 11), q) for q = 0, 50, 90, 99, 100
        self.assertEqual(stats.percentile(xs, 0), 1)
        self.assertAlmostEqual(stats.percentile(xs, 50), 5.5)
        self.assertAlmostEqual(stats.percentile(xs, 90), 9.1)
        self.assertAlmostEqual(stats.percentile(xs, 99), 9.91)
        self.assertEqual(stats.percentile(xs, 100), 10)

    def test_order_of_input_does_not_matter(self):
        self.assertAlmostEqual(stats.percentile([9, 1, 5, 3, 7], 25), 3.0)
        self.assertAlmostEqual(stats.percentile([9, 1, 5, 3, 7], 75), 7.0)

    def test_single_and_empty(self):
        self.assertEqual(stats.percentile([0.004], 99), 0.004)
        self.assertIsNone(stats.percentile([], 50))

    def test_out_of_range(self):
        with self.assertRaises(ValueError):
            stats.percentile([1, 2], 101)


class Summarize(unittest.TestCase):
    def test_failed_runs_are_counted_not_used(self):
        s = stats.summarize([0.001, 0.5, 0.003, 0.002], [0, 1, 0, 0])
        self.assertEqual(s["runs"], 4)
        self.assertEqual(s["failures"], 1)
        self.assertEqual(s["ok"], 3)
        self.assertAlmostEqual(s["p50"], 0.002)
        self.assertAlmostEqual(s["max"], 0.003)  # the failed 0.5 s run is not a latency
        self.assertAlmostEqual(s["mean"], 0.002)

    def test_all_failed_has_no_percentiles(self):
        s = stats.summarize([0.1, 0.2], [1, 2])
        self.assertEqual(s["failures"], 2)
        self.assertNotIn("p50", s)

    def test_exit_code_count_must_match(self):
        with self.assertRaises(ValueError):
            stats.summarize([0.1, 0.2], [0])


class Ratios(unittest.TestCase):
    def test_peer_slower_means_sbx_faster(self):
        self.assertEqual(stats.ratio_text("bwrap", 0.0045, 0.0025), "bwrap/sbx = 1.80\u00d7 (sbx faster)")

    def test_peer_faster_means_sbx_slower(self):
        self.assertEqual(stats.ratio_text("crun", 0.002, 0.004), "crun/sbx = 0.50\u00d7 (sbx slower)")

    def test_missing_side_gives_no_ratio(self):
        self.assertEqual(stats.ratio_text("runc", 0.02, None), "n/a")
        self.assertIsNone(stats.ratio(0.0, 0.1))


class Formatting(unittest.TestCase):
    def test_ms(self):
        self.assertEqual(stats.fmt_ms(0.00123), "1.23")
        self.assertEqual(stats.fmt_ms(0.0456), "45.6")
        self.assertEqual(stats.fmt_ms(0.1974), "197")
        self.assertEqual(stats.fmt_ms(None), "-")

    def test_bytes(self):
        self.assertEqual(stats.fmt_bytes(512), "512 B")
        self.assertEqual(stats.fmt_bytes(1536), "1.5 KiB")
        self.assertEqual(stats.fmt_bytes(100 * 1024 * 1024), "100.0 MiB")
        self.assertEqual(stats.fmt_bytes(3 * 1024**4), "3072.0 GiB")

    def test_cdf_and_slope(self):
        self.assertEqual(stats.cdf_points([3, 1, 2, 4]), [(1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)])
        self.assertAlmostEqual(stats.linear_slope([(0, 1), (10, 21), (20, 41)]), 2.0)
        self.assertIsNone(stats.linear_slope([(5, 1), (5, 2)]))


if __name__ == "__main__":
    unittest.main()
