"""Calendar toolkit: date arithmetic a model cannot do reliably in its head.

Models are bad at "what weekday is 2031-07-14" or "how many days until the next birthday", and worse
around daylight-saving transitions. These tools do the arithmetic with ``zoneinfo`` and return
structured JSON. Conventions that matter for correctness:

* Dates are ISO 8601 strings (``2024-03-10``, ``2024-03-10T14:30``, ``2024-03-10T14:30:00+01:00``,
  ``...Z``) or the words ``now``, ``today``, ``yesterday``, ``tomorrow``.
* A date without an offset is wall-clock time in the call's ``timezone`` (default: the toolkit's,
  itself UTC by default). A wall-clock time skipped by a DST jump is refused, since it never happened;
  a repeated one (DST fall-back) means its first occurrence.
* Seconds, minutes and hours are exact elapsed time; days, weeks, months and years are calendar units
  on the wall clock (one day after noon is noon, even across a DST change).
"""

import calendar as _calendar
import functools
import re
from collections.abc import Callable
from datetime import date as _date
from datetime import datetime, timedelta, tzinfo
from datetime import timezone as dt_timezone
from typing import Any, Literal, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

__all__ = [
    "TOOLS",
    "CalendarInputError",
    "CalendarToolkit",
    "CallContext",
    "add_time",
    "calculate_age",
    "compare_dates",
    "convert_timezone",
    "current_datetime",
    "date_difference",
    "end_of_period",
    "format_date",
    "get_days_in_month",
    "get_timestamp",
    "get_timezone_info",
    "get_week_number",
    "get_weekday",
    "is_date_in_range",
    "is_leap_year",
    "is_weekend",
    "start_of_period",
    "subtract_time",
]

_UTC = dt_timezone.utc
_ISO = re.compile(
    r"^(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<tz>Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_EXACT_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600}

Unit = Literal["seconds", "minutes", "hours", "days", "weeks", "months", "years"]
DiffUnit = Literal["seconds", "minutes", "hours", "days", "weeks", "months", "years", "all"]
Period = Literal["day", "week", "month", "quarter", "year"]

F = TypeVar("F", bound=Callable[..., Any])


class CalendarInputError(ValueError):
    """An input the model can fix (bad date, unknown zone); becomes an error output, not a crash."""


def _guard(fn: F) -> F:
    """Turn expected input errors into error outputs so the model sees what to correct."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CalendarInputError as exc:
            return ToolOutput.error(str(exc))
        except OverflowError:
            return ToolOutput.error("date out of range: results must stay within the years 1..9999")

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- parsing and resolution


def load_zone(name: str) -> ZoneInfo:
    """Load an IANA zone, with an error that tells the model what a valid name looks like."""
    cleaned = name.strip()
    if cleaned.upper() in ("UTC", "Z", "GMT"):
        cleaned = "UTC"
    try:
        return ZoneInfo(cleaned)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CalendarInputError(
            f"unknown timezone {name!r}: use an IANA name such as 'UTC', 'Europe/Berlin' or 'America/New_York'"
        ) from None


def _zone_name(tz: tzinfo | None, dt: datetime) -> str:
    """IANA key when there is one; a fixed offset (from an input like ``+05:30``) reads ``UTC+05:30``."""
    if isinstance(tz, ZoneInfo):
        return tz.key
    offset = dt.utcoffset() or timedelta(0)
    return "UTC" if not offset else f"UTC{_format_offset(offset)}"


def _format_offset(offset: timedelta) -> str:
    total = int(offset.total_seconds())
    sign = "-" if total < 0 else "+"
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text


def _is_nonexistent(naive: datetime, tz: tzinfo) -> bool:
    """A wall time inside a DST gap does not survive a round trip through UTC."""
    aware = naive.replace(tzinfo=tz)
    back = aware.astimezone(_UTC).astimezone(tz).replace(tzinfo=None)
    return back != naive


def resolve_local(naive: datetime, tz: tzinfo) -> datetime:
    """Attach ``tz`` to a computed wall time; a time inside a DST gap moves forward by the gap.

    Used for arithmetic results (``2024-03-09T02:30`` plus one day in New York lands in the gap and
    becomes 03:30 EDT), whereas parsed input inside a gap is refused.
    """
    aware = naive.replace(tzinfo=tz, fold=0)
    return aware.astimezone(_UTC).astimezone(tz)


def _parse_offset(text: str) -> dt_timezone:
    if text in ("Z", "z"):
        return _UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:4]) if len(digits) > 2 else 0
    if hours > 23 or minutes > 59:
        raise CalendarInputError(f"invalid UTC offset {text!r}")
    return dt_timezone(sign * timedelta(hours=hours, minutes=minutes))


class CallContext:
    """Per-call settings: the zone naive inputs mean, whether it was explicit, and 'now'."""

    def __init__(self, zone: tzinfo, explicit: bool, now_utc: datetime) -> None:
        self.zone = zone
        self.explicit = explicit
        self.now_utc = now_utc

    def now(self) -> datetime:
        return self.now_utc.astimezone(self.zone)

    def parse(self, value: str, field: str = "date") -> datetime:
        text = value.strip()
        word = text.lower()
        if word in ("now", "today", "yesterday", "tomorrow"):
            now = self.now()
            if word == "now":
                return now
            day = now.date() + timedelta(days={"today": 0, "yesterday": -1, "tomorrow": 1}[word])
            return resolve_local(datetime(day.year, day.month, day.day), self.zone)
        match = _ISO.match(text)
        if not match:
            raise CalendarInputError(
                f"invalid {field} {value!r}: expected ISO 8601 such as '2024-03-10', "
                "'2024-03-10T14:30:00' or '2024-03-10T14:30:00+01:00', or one of now/today/"
                "yesterday/tomorrow"
            )
        parts = match.groupdict()
        fraction = (parts["f"] or "0")[:6].ljust(6, "0")
        try:
            naive = datetime(
                int(parts["y"]),
                int(parts["mo"]),
                int(parts["d"]),
                int(parts["h"] or 0),
                int(parts["mi"] or 0),
                int(parts["s"] or 0),
                int(fraction),
            )
        except ValueError as exc:
            raise CalendarInputError(f"invalid {field} {value!r}: {exc}") from None
        if parts["tz"]:
            try:
                offset = _parse_offset(parts["tz"])
            except CalendarInputError as exc:
                raise CalendarInputError(f"invalid {field} {value!r}: {exc}") from None
            aware = naive.replace(tzinfo=offset)
            return aware.astimezone(self.zone) if self.explicit else aware
        if parts["h"] is None:
            # A bare date means the start of that day, even where midnight itself is skipped by DST.
            return resolve_local(naive, self.zone)
        if _is_nonexistent(naive, self.zone):
            raise CalendarInputError(
                f"invalid {field} {value!r}: this wall-clock time does not exist in "
                f"{_zone_name(self.zone, naive.replace(tzinfo=self.zone))} (the clocks jump forward "
                "over it at a daylight-saving transition); give a time outside the gap or add an offset"
            )
        return naive.replace(tzinfo=self.zone)


# What the tools get first: the toolkit's ``context`` (a call's timezone argument -> its CallContext).
Resolve = Callable[[str | None], CallContext]


def describe(dt: datetime) -> dict[str, Any]:
    """The facts a model usually needs next to a datetime, so it does not ask a second tool."""
    offset = dt.utcoffset() or timedelta(0)
    return {
        "datetime": dt.isoformat(),
        "date": dt.date().isoformat(),
        "time": dt.strftime("%H:%M:%S"),
        "timezone": _zone_name(dt.tzinfo, dt),
        "abbreviation": dt.tzname(),
        "utc_offset": _format_offset(offset),
        "weekday": _WEEKDAYS[dt.weekday()],
        "timestamp": _timestamp(dt),
    }


def _timestamp(dt: datetime) -> int | float:
    value = dt.timestamp()
    return int(value) if value == int(value) else value


def _number(value: float) -> int | float:
    """Whole numbers as ints (``3``, not ``3.0``) so the JSON reads naturally."""
    rounded = round(value, 6)
    return int(rounded) if rounded == int(rounded) else rounded


# ---------------------------------------------------------------- calendar arithmetic


def add_months(dt: datetime, months: int) -> datetime:
    """Shift by calendar months, clamping the day (Jan 31 + 1 month = Feb 28/29)."""
    index = dt.year * 12 + (dt.month - 1) + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise CalendarInputError("result is outside the supported years 1..9999")
    day = min(dt.day, _calendar.monthrange(year, month + 1)[1])
    return dt.replace(year=year, month=month + 1, day=day)


def shift(dt: datetime, amount: int, unit: str) -> datetime:
    """Exact units move the instant; calendar units move the wall clock, then re-resolve the zone."""
    try:
        if unit in _EXACT_UNITS:
            moved = dt.astimezone(_UTC) + timedelta(seconds=amount * _EXACT_UNITS[unit])
            return moved.astimezone(dt.tzinfo)
        naive = dt.replace(tzinfo=None)
        if unit == "days":
            naive = naive + timedelta(days=amount)
        elif unit == "weeks":
            naive = naive + timedelta(weeks=amount)
        elif unit == "months":
            naive = add_months(naive, amount)
        elif unit == "years":
            naive = add_months(naive, amount * 12)
        else:  # pragma: no cover - Literal validation keeps other units out
            raise CalendarInputError(f"unknown unit {unit!r}")
        return resolve_local(naive, dt.tzinfo or _UTC)
    except OverflowError:
        raise CalendarInputError("result is outside the supported years 1..9999") from None


def _whole_months(start: datetime, end: datetime) -> int:
    """Completed calendar months from start to end (start <= end), on the wall clock."""
    months = (end.year - start.year) * 12 + (end.month - start.month)
    if months > 0 and add_months(start, months) > end:
        months -= 1
    return months


def breakdown(start: datetime, end: datetime) -> dict[str, int]:
    """Years, months, days, hours, minutes, seconds between two naive wall times (start <= end)."""
    months = _whole_months(start, end)
    anchor = add_months(start, months)
    rest = end - anchor
    hours, remainder = divmod(rest.seconds, 3600)
    minutes, seconds = divmod(remainder, 60)
    return {
        "years": months // 12,
        "months": months % 12,
        "days": rest.days,
        "hours": hours,
        "minutes": minutes,
        "seconds": seconds,
    }


def period_start(dt: datetime, period: str) -> datetime:
    day = dt.date()
    if period == "week":
        day = day - timedelta(days=day.weekday())
    elif period == "month":
        day = day.replace(day=1)
    elif period == "quarter":
        day = day.replace(month=3 * ((day.month - 1) // 3) + 1, day=1)
    elif period == "year":
        day = day.replace(month=1, day=1)
    return resolve_local(datetime(day.year, day.month, day.day), dt.tzinfo or _UTC)


def period_end(dt: datetime, period: str) -> datetime:
    start = period_start(dt, period).replace(tzinfo=None)
    if period == "day":
        nxt = start + timedelta(days=1)
    elif period == "week":
        nxt = start + timedelta(weeks=1)
    else:
        nxt = add_months(start, {"month": 1, "quarter": 3, "year": 12}[period])
    return resolve_local(nxt - timedelta(microseconds=1), dt.tzinfo or _UTC)


def _check_year(year: int) -> None:
    if not 1 <= year <= 9999:
        raise CalendarInputError(f"invalid year {year}: must be between 1 and 9999")


def _check_month(month: int) -> None:
    if not 1 <= month <= 12:
        raise CalendarInputError(f"invalid month {month}: must be between 1 and 12")


# ---------------------------------------------------------------- the tools
#
# Each tool is a plain function (a test imports and calls it); those that read dates take first the
# toolkit's resolver ``ctx`` (timezone argument -> the zone, 'now' and the parser of that call), which
# ``CalendarToolkit.provide`` binds.


@_guard
def current_datetime(ctx: Resolve, timezone: str | None = None) -> ToolOutput:
    """Get the current date and time, with weekday, UTC offset and Unix timestamp.

    Args:
        timezone: IANA timezone such as 'Europe/Berlin'; default the toolkit's zone
    """
    return ToolOutput.from_value(describe(ctx(timezone).now()))


@_guard
def get_timestamp(
    ctx: Resolve, date: str = "now", timezone: str | None = None, milliseconds: bool = False
) -> ToolOutput:
    """Convert a date to a Unix timestamp (seconds since 1970-01-01T00:00:00Z).

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        timezone: IANA timezone used to read a date without an offset
        milliseconds: return milliseconds instead of seconds
    """
    dt = ctx(timezone).parse(date)
    value = dt.timestamp() * (1000 if milliseconds else 1)
    return ToolOutput.from_value(
        {
            "timestamp": _number(value),
            "unit": "milliseconds" if milliseconds else "seconds",
            "datetime": dt.isoformat(),
        }
    )


@_guard
def format_date(ctx: Resolve, date: str, format: str = "%Y-%m-%d %H:%M:%S", timezone: str | None = None) -> ToolOutput:
    """Format a date with a strftime pattern or a preset ('iso', 'rfc2822', 'date', 'time', 'human').

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        format: strftime pattern such as '%A %d %B %Y', or a preset name
        timezone: IANA timezone to express the date in
    """
    dt = ctx(timezone).parse(date)
    presets = {
        "iso": None,
        "rfc2822": "%a, %d %b %Y %H:%M:%S %z",
        "date": "%Y-%m-%d",
        "time": "%H:%M:%S",
        "human": "%A, %B %d, %Y %H:%M %Z",
    }
    key = format.strip().lower()
    if key in presets:
        pattern = presets[key]
        text = dt.isoformat() if pattern is None else dt.strftime(pattern)
    else:
        if "%" not in format:
            raise CalendarInputError(
                f"invalid format {format!r}: use a strftime pattern such as '%Y-%m-%d %H:%M' "
                f"or one of the presets {', '.join(presets)}"
            )
        text = dt.strftime(format)
    return ToolOutput.from_value({"formatted": text, "datetime": dt.isoformat()})


@_guard
def date_difference(
    ctx: Resolve, start_date: str, end_date: str, unit: DiffUnit = "all", timezone: str | None = None
) -> ToolOutput:
    """Difference between two dates; negative when end_date is before start_date.

    seconds/minutes/hours are exact elapsed time; days/weeks count wall-clock days (a DST day
    is still one day); months/years count completed calendar months/years; 'all' gives a
    years..seconds breakdown plus totals.

    Args:
        start_date: ISO 8601 date or datetime
        end_date: ISO 8601 date or datetime
        unit: seconds, minutes, hours, days, weeks, months, years or all
        timezone: IANA timezone used to read dates without an offset
    """
    c = ctx(timezone)
    start = c.parse(start_date, "start_date")
    end = c.parse(end_date, "end_date").astimezone(start.tzinfo)
    sign = -1 if end < start else 1
    lo, hi = (start, end) if sign > 0 else (end, start)
    elapsed = (hi.astimezone(_UTC) - lo.astimezone(_UTC)).total_seconds()
    wall = (hi.replace(tzinfo=None) - lo.replace(tzinfo=None)).total_seconds()
    months = _whole_months(lo.replace(tzinfo=None), hi.replace(tzinfo=None))
    values: dict[str, int | float] = {
        "seconds": _number(sign * elapsed),
        "minutes": _number(sign * elapsed / 60),
        "hours": _number(sign * elapsed / 3600),
        "days": _number(sign * wall / 86400),
        "weeks": _number(sign * wall / (7 * 86400)),
        "months": sign * months,
        "years": sign * (months // 12),
    }
    result: dict[str, Any] = {"start": start.isoformat(), "end": end.isoformat()}
    if unit == "all":
        parts = breakdown(lo.replace(tzinfo=None), hi.replace(tzinfo=None))
        result.update({"negative": sign < 0, "breakdown": parts})
        result.update({f"total_{k}": v for k, v in values.items()})
    else:
        result.update({"unit": unit, "value": values[unit]})
    return ToolOutput.from_value(result)


def _shift_tool(ctx: Resolve, date: str, amount: int, unit: str, timezone: str | None, sign: int) -> ToolOutput:
    dt = ctx(timezone).parse(date)
    moved = shift(dt, sign * amount, unit)
    return ToolOutput.from_value({"input": dt.isoformat(), "amount": amount, "unit": unit, **describe(moved)})


@_guard
def add_time(ctx: Resolve, date: str, amount: int, unit: Unit, timezone: str | None = None) -> ToolOutput:
    """Add an amount of time to a date (days and larger follow the calendar, across DST too).

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        amount: how many units to add (negative subtracts)
        unit: seconds, minutes, hours, days, weeks, months or years
        timezone: IANA timezone used to read a date without an offset
    """
    return _shift_tool(ctx, date, amount, unit, timezone, 1)


@_guard
def subtract_time(ctx: Resolve, date: str, amount: int, unit: Unit, timezone: str | None = None) -> ToolOutput:
    """Subtract an amount of time from a date (days and larger follow the calendar).

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        amount: how many units to subtract (negative adds)
        unit: seconds, minutes, hours, days, weeks, months or years
        timezone: IANA timezone used to read a date without an offset
    """
    return _shift_tool(ctx, date, amount, unit, timezone, -1)


@_guard
def calculate_age(
    ctx: Resolve, birth_date: str, reference_date: str = "today", timezone: str | None = None
) -> ToolOutput:
    """Age in years, months and days on a reference date, and the next birthday.

    A 29 February birthday is celebrated on 28 February in common years.

    Args:
        birth_date: ISO 8601 date of birth
        reference_date: the date to compute the age at; default today
        timezone: IANA timezone that decides what 'today' is
    """
    c = ctx(timezone)
    born = c.parse(birth_date, "birth_date").date()
    ref = c.parse(reference_date, "reference_date").date()
    if born > ref:
        raise CalendarInputError(f"birth_date {born.isoformat()} is after reference_date {ref.isoformat()}")
    parts = breakdown(datetime(born.year, born.month, born.day), datetime(ref.year, ref.month, ref.day))

    def birthday_in(year: int) -> _date:
        day = min(born.day, _calendar.monthrange(year, born.month)[1])
        return _date(year, born.month, day)

    upcoming = birthday_in(ref.year)
    if upcoming < ref:
        upcoming = birthday_in(ref.year + 1)
    return ToolOutput.from_value(
        {
            "birth_date": born.isoformat(),
            "reference_date": ref.isoformat(),
            "years": parts["years"],
            "months": parts["months"],
            "days": parts["days"],
            "total_days": (ref - born).days,
            "is_birthday_today": upcoming == ref,
            "next_birthday": upcoming.isoformat(),
            "days_until_next_birthday": (upcoming - ref).days,
            "age_at_next_birthday": upcoming.year - born.year,
        }
    )


@_guard
def convert_timezone(ctx: Resolve, date: str, to_timezone: str, from_timezone: str | None = None) -> ToolOutput:
    """Express a moment in another timezone.

    Args:
        date: ISO 8601 datetime; without an offset it is read in from_timezone
        to_timezone: IANA timezone to convert to, such as 'Asia/Tokyo'
        from_timezone: IANA timezone of a date without an offset; default the toolkit's zone
    """
    target = load_zone(to_timezone)
    source = ctx(from_timezone).parse(date)
    return ToolOutput.from_value({"source": describe(source), "result": describe(source.astimezone(target))})


@_guard
def get_timezone_info(ctx: Resolve, timezone: str, date: str = "now") -> ToolOutput:
    """UTC offset, abbreviation and daylight-saving status of a timezone at a moment.

    Args:
        timezone: IANA timezone such as 'Europe/Berlin'
        date: the moment to look at (offsets change with DST); default now
    """
    c = ctx(timezone)
    dt = c.parse(date)
    dst = dt.dst()
    year = dt.year
    jan = resolve_local(datetime(year, 1, 1, 12), c.zone).utcoffset()
    jul = resolve_local(datetime(year, 7, 1, 12), c.zone).utcoffset()
    offset = dt.utcoffset() or timedelta(0)
    return ToolOutput.from_value(
        {
            "timezone": _zone_name(c.zone, dt),
            "datetime": dt.isoformat(),
            "abbreviation": dt.tzname(),
            "utc_offset": _format_offset(offset),
            "utc_offset_seconds": int(offset.total_seconds()),
            "is_dst": bool(dst),
            "dst_offset_seconds": int(dst.total_seconds()) if dst else 0,
            "observes_dst_this_year": jan != jul,
        }
    )


@_guard
def get_weekday(ctx: Resolve, date: str, timezone: str | None = None) -> ToolOutput:
    """Day of the week of a date (ISO numbering: Monday=1 .. Sunday=7) and day of the year.

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        timezone: IANA timezone used to read the date
    """
    dt = ctx(timezone).parse(date)
    return ToolOutput.from_value(
        {
            "date": dt.date().isoformat(),
            "weekday": _WEEKDAYS[dt.weekday()],
            "iso_weekday": dt.isoweekday(),
            "day_of_year": dt.timetuple().tm_yday,
        }
    )


@_guard
def is_weekend(ctx: Resolve, date: str, timezone: str | None = None) -> ToolOutput:
    """Whether a date falls on a Saturday or Sunday.

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        timezone: IANA timezone used to read the date
    """
    dt = ctx(timezone).parse(date)
    return ToolOutput.from_value(
        {
            "date": dt.date().isoformat(),
            "weekday": _WEEKDAYS[dt.weekday()],
            "is_weekend": dt.weekday() >= 5,
        }
    )


@_guard
def is_leap_year(year: int) -> ToolOutput:
    """Whether a year is a Gregorian leap year (every 4th year, but centuries only every 400th).

    Args:
        year: the year, 1..9999
    """
    _check_year(year)
    leap = _calendar.isleap(year)
    return ToolOutput.from_value({"year": year, "is_leap_year": leap, "days_in_year": 366 if leap else 365})


@_guard
def get_days_in_month(year: int, month: int) -> ToolOutput:
    """Number of days in a month of a year (February depends on leap years).

    Args:
        year: the year, 1..9999
        month: the month, 1..12
    """
    _check_year(year)
    _check_month(month)
    days = _calendar.monthrange(year, month)[1]
    return ToolOutput.from_value(
        {"year": year, "month": month, "month_name": _calendar.month_name[month], "days": days}
    )


def _period_tool(
    ctx: Resolve, date: str, period: str, timezone: str | None, bound: Callable[[datetime, str], datetime]
) -> ToolOutput:
    dt = ctx(timezone).parse(date)
    return ToolOutput.from_value({"period": period, "input": dt.isoformat(), **describe(bound(dt, period))})


@_guard
def start_of_period(ctx: Resolve, date: str, period: Period, timezone: str | None = None) -> ToolOutput:
    """First moment of the day, ISO week (Monday), month, quarter or year containing a date.

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        period: day, week, month, quarter or year
        timezone: IANA timezone whose calendar is used
    """
    return _period_tool(ctx, date, period, timezone, period_start)


@_guard
def end_of_period(ctx: Resolve, date: str, period: Period, timezone: str | None = None) -> ToolOutput:
    """Last moment (…23:59:59.999999) of the day, ISO week (Sunday), month, quarter or year.

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        period: day, week, month, quarter or year
        timezone: IANA timezone whose calendar is used
    """
    return _period_tool(ctx, date, period, timezone, period_end)


@_guard
def get_week_number(ctx: Resolve, date: str, timezone: str | None = None) -> ToolOutput:
    """ISO 8601 week number; early January or late December may belong to another ISO year.

    Args:
        date: ISO 8601 date or datetime, or now/today/yesterday/tomorrow
        timezone: IANA timezone used to read the date
    """
    dt = ctx(timezone).parse(date)
    iso = dt.isocalendar()
    return ToolOutput.from_value(
        {"date": dt.date().isoformat(), "iso_year": iso[0], "week": iso[1], "iso_weekday": iso[2]}
    )


@_guard
def compare_dates(ctx: Resolve, date1: str, date2: str, timezone: str | None = None) -> ToolOutput:
    """Whether date1 is before, after or equal to date2 (as moments in time).

    Args:
        date1: ISO 8601 date or datetime
        date2: ISO 8601 date or datetime
        timezone: IANA timezone used to read dates without an offset
    """
    c = ctx(timezone)
    first = c.parse(date1, "date1")
    second = c.parse(date2, "date2")
    relation = "before" if first < second else "after" if first > second else "equal"
    return ToolOutput.from_value(
        {
            "date1": first.isoformat(),
            "date2": second.isoformat(),
            "result": relation,
            "difference_seconds": _number((second - first).total_seconds()),
        }
    )


@_guard
def is_date_in_range(
    ctx: Resolve, date: str, start_date: str, end_date: str, inclusive: bool = True, timezone: str | None = None
) -> ToolOutput:
    """Whether a date lies between start_date and end_date.

    Args:
        date: ISO 8601 date or datetime to test
        start_date: start of the range
        end_date: end of the range (must not be before start_date)
        inclusive: whether the range includes its two ends
        timezone: IANA timezone used to read dates without an offset
    """
    c = ctx(timezone)
    dt = c.parse(date)
    start = c.parse(start_date, "start_date")
    end = c.parse(end_date, "end_date")
    if end < start:
        raise CalendarInputError(f"end_date {end.isoformat()} is before start_date {start.isoformat()}")
    inside = start <= dt <= end if inclusive else start < dt < end
    return ToolOutput.from_value(
        {
            "date": dt.isoformat(),
            "start": start.isoformat(),
            "end": end.isoformat(),
            "inclusive": inclusive,
            "in_range": inside,
        }
    )


# In the order the toolkit offers them.
TOOLS: tuple[Callable[..., ToolOutput], ...] = (
    current_datetime,
    get_timestamp,
    format_date,
    date_difference,
    add_time,
    subtract_time,
    calculate_age,
    convert_timezone,
    get_timezone_info,
    get_weekday,
    is_weekend,
    is_leap_year,
    get_days_in_month,
    start_of_period,
    end_of_period,
    get_week_number,
    compare_dates,
    is_date_in_range,
)
NEEDS_CONTEXT = frozenset(fn.__name__ for fn in TOOLS) - {"get_days_in_month", "is_leap_year"}


class CalendarToolkit(Toolkit):
    """Timezone-aware date and time tools (18), default zone UTC.

    ``clock`` returns the current time as an aware datetime; tests pass a fixed one so "now" and
    "today" are deterministic.
    """

    name = "calendar"

    def __init__(self, timezone: str = "UTC", clock: Callable[[], datetime] | None = None) -> None:
        super().__init__()
        try:
            self._zone = load_zone(timezone)
        except CalendarInputError as exc:
            raise ValueError(str(exc)) from None
        self._clock = clock or (lambda: datetime.now(_UTC))

    @property
    def timezone(self) -> str:
        return self._zone.key

    def guidelines(self) -> str:
        return (
            "Use the calendar tools for any date arithmetic instead of computing it yourself. "
            "Dates are ISO 8601 ('2024-03-10', '2024-03-10T14:30:00', '2024-03-10T14:30:00+01:00') "
            "or now/today/yesterday/tomorrow. Times without an offset are read in the `timezone` "
            f"argument, default {self._zone.key}; timezones are IANA names such as 'Europe/Berlin'."
        )

    def context(self, tz_name: str | None) -> CallContext:
        """The zone, 'now' and date parser of one call: ``tz_name``, else the toolkit's zone."""
        now = self._clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=_UTC)
        if tz_name is None or not tz_name.strip():
            return CallContext(self._zone, False, now.astimezone(_UTC))
        return CallContext(load_zone(tz_name), True, now.astimezone(_UTC))

    def provide(self) -> list[Tool]:
        return [tool(name=fn.__name__)(functools.partial(fn, self.context) if fn.__name__ in NEEDS_CONTEXT else fn)
                for fn in TOOLS]
