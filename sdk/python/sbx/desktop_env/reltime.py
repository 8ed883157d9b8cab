"""OSWorld's ``rule_relativeTime`` getter: dates relative to "now" written into the expected
values of a rule (``{"relativeTime": {"from": "tomorrow"[, "to": ...]}, "expected": {"time":
"{MonthFull} {DayD}, {Year}"}}``). "Now" is the sandbox's local time, as in OSWorld's newer
getter (the task's clock is the machine the agent sees).
"""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Any, Dict, Mapping, Optional

from .errors import EvaluationError

DOW = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTH = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
MONTH_FULL = ["January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"]


def _nth_next_month(now: _dt.datetime, day: int) -> _dt.datetime:
    y, m = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return _dt.datetime(y, m, day)


def _first_monday_months_later(now: _dt.datetime, months: int) -> _dt.datetime:
    m0 = now.month - 1 + months
    first = _dt.datetime(now.year + m0 // 12, m0 % 12 + 1, 1)
    return first + _dt.timedelta(days=(7 - first.weekday()) % 7)


def day_for(name: str, now: _dt.datetime, other: Optional[str] = None) -> _dt.datetime:
    """The day a relative name means at `now` (`other`: the range's `from`, for `to`)."""
    wd = now.weekday()
    days = {
        "tomorrow": 1, "this month": 0, "this Saturday": 5 - wd, "this Sunday": 6 - wd,
        "next Monday": 7 - wd,
        "next Friday": (4 - wd + 7) if (wd < 4 and other == "next Monday")
        else (4 - wd if wd < 4 else 6 - wd + 5),
    }
    if name in days:
        return now + _dt.timedelta(days=days[name])
    nth = {"5th next month": 5, "10th next month": 10, "11th next month": 11}
    if name in nth:
        return _nth_next_month(now, nth[name])
    later = {"first monday four months later": 4, "first monday eight months later": 8}
    if name in later:
        return _first_monday_months_later(now, later[name])
    raise EvaluationError("rule_relativeTime: relative time `%s` is not known (have: %s)" % (
        name, ", ".join(sorted(list(days) + list(nth) + list(later)))))


def fill(fmt: str, day: _dt.datetime) -> str:
    """OSWorld's placeholders: {DoW} {Month} {DayD} {Year} {Month0D} {month} {MonthFull}
    {Day0D}."""
    for k, v in (("{DoW}", DOW[day.weekday()]), ("{Month}", MONTH[day.month - 1]),
                 ("{DayD}", str(day.day)), ("{Year}", str(day.year)),
                 ("{Month0D}", "%02d" % day.month), ("{month}", MONTH_FULL[day.month - 1].lower()),
                 ("{MonthFull}", MONTH_FULL[day.month - 1]), ("{Day0D}", "%02d" % day.day)):
        fmt = fmt.replace(k, v, 1)
    return fmt


def resolve(rules: Mapping[str, Any], now: _dt.datetime) -> Dict[str, Any]:
    """The rules with their expected time(s) filled in: `time` for a single `from`, `from` and
    `to` for a range."""
    out = copy.deepcopy(dict(rules))
    rel = out["relativeTime"]
    exp = out["expected"]
    if "to" not in rel:
        exp["time"] = fill(exp["time"], day_for(rel["from"], now))
    else:
        exp["from"] = fill(exp["from"], day_for(rel["from"], now))
        exp["to"] = fill(exp["to"], day_for(rel["to"], now, rel["from"]))
    return out
