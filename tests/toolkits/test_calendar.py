"""Calendar toolkit: known calendar facts, DST transitions, leap years, bad input and filters."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.toolkits.helpers import err
from toolfork.toolkits.calendar import CalendarToolkit
from toolfork.tools import Tool, ToolInputError, ToolOutput

FIXED_NOW = datetime(2024, 3, 10, 6, 59, 59, tzinfo=timezone.utc)  # one second before NY springs forward

EXPECTED_TOOLS = [
    "current_datetime",
    "get_timestamp",
    "format_date",
    "date_difference",
    "add_time",
    "subtract_time",
    "calculate_age",
    "convert_timezone",
    "get_timezone_info",
    "get_weekday",
    "is_weekend",
    "is_leap_year",
    "get_days_in_month",
    "start_of_period",
    "end_of_period",
    "get_week_number",
    "compare_dates",
    "is_date_in_range",
]


@pytest.fixture
def cal() -> dict[str, Tool]:
    return {t.name: t for t in CalendarToolkit(clock=lambda: FIXED_NOW).tools()}


def ok(tools: dict[str, Tool], name: str, **args: Any) -> dict[str, Any]:
    out = tools[name].invoke(args)
    assert isinstance(out, ToolOutput)
    assert not out.is_error, out.as_text()
    assert json.loads(out.as_text()) == out.data  # the model reads the same JSON the program gets
    return out.data  # type: ignore[no-any-return]


# ---------------------------------------------------------------- toolkit shape


def test_provides_the_eighteen_tools_with_schemas_and_guidelines() -> None:
    kit = CalendarToolkit()
    names = [t.name for t in kit.tools()]
    assert names == EXPECTED_TOOLS
    for t in kit.tools():
        schema = t.to_json_schema()
        assert schema["type"] == "object"
        assert t.description
    assert "IANA" in (kit.guidelines() or "")
    add = {t.name: t for t in kit.tools()}["add_time"].to_json_schema()
    assert add["properties"]["unit"]["enum"] == ["seconds", "minutes", "hours", "days", "weeks", "months", "years"]
    assert set(add["required"]) == {"date", "amount", "unit"}


def test_only_exclude_and_with_filters() -> None:
    only = CalendarToolkit().only(["add_time", "subtract_time"])
    assert [t.name for t in only.tools()] == ["add_time", "subtract_time"]
    excluded = CalendarToolkit().exclude(["current_datetime", "get_timestamp"])
    names = [t.name for t in excluded.tools()]
    assert len(names) == 16 and "current_datetime" not in names and "get_timestamp" not in names
    adjusted = CalendarToolkit().with_("is_leap_year", lambda t: t.configure(max_runs=2))
    assert {t.name: t for t in adjusted.tools()}["is_leap_year"].max_runs == 2


def test_unknown_default_timezone_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="unknown timezone 'Nowhere/City'"):
        CalendarToolkit(timezone="Nowhere/City")


def test_default_timezone_of_the_toolkit_applies_to_naive_inputs() -> None:
    tools = {t.name: t for t in CalendarToolkit(timezone="Asia/Tokyo").tools()}
    data = ok(tools, "get_timestamp", date="2024-01-01T09:00:00")
    assert data["timestamp"] == 1704067200  # 09:00 in Tokyo is midnight UTC


# ---------------------------------------------------------------- now, timestamps, formatting


def test_current_datetime_uses_the_clock_and_the_requested_zone(cal: dict[str, Tool]) -> None:
    utc = ok(cal, "current_datetime")
    assert utc["datetime"] == "2024-03-10T06:59:59+00:00"
    assert utc["timezone"] == "UTC" and utc["weekday"] == "Sunday" and utc["timestamp"] == 1710053999
    ny = ok(cal, "current_datetime", timezone="America/New_York")
    assert ny["datetime"] == "2024-03-10T01:59:59-05:00"
    assert ny["abbreviation"] == "EST"


def test_relative_words_follow_the_clock(cal: dict[str, Tool]) -> None:
    assert ok(cal, "get_weekday", date="tomorrow")["date"] == "2024-03-11"
    assert ok(cal, "get_weekday", date="yesterday")["date"] == "2024-03-09"
    # In Los Angeles it is still the 9th when UTC is 06:59 on the 10th.
    assert ok(cal, "get_weekday", date="today", timezone="America/Los_Angeles")["date"] == "2024-03-09"


def test_get_timestamp_known_values(cal: dict[str, Tool]) -> None:
    assert ok(cal, "get_timestamp", date="2024-01-01T00:00:00Z")["timestamp"] == 1704067200
    assert ok(cal, "get_timestamp", date="2024-01-01")["timestamp"] == 1704067200
    assert ok(cal, "get_timestamp", date="2024-01-01T01:00:00+01:00")["timestamp"] == 1704067200
    ms = ok(cal, "get_timestamp", date="2024-01-01T00:00:00.250Z", milliseconds=True)
    assert ms["timestamp"] == 1704067200250 and ms["unit"] == "milliseconds"
    assert ok(cal, "get_timestamp", date="now")["timestamp"] == 1710053999


def test_format_date_patterns_and_presets(cal: dict[str, Tool]) -> None:
    assert ok(cal, "format_date", date="2024-03-10", format="%A %d %B %Y")["formatted"] == "Sunday 10 March 2024"
    assert ok(cal, "format_date", date="2024-03-10T15:04:05Z", format="rfc2822")["formatted"] == (
        "Sun, 10 Mar 2024 15:04:05 +0000"
    )
    converted = ok(cal, "format_date", date="2024-07-01T12:00:00Z", format="%H:%M %Z", timezone="Europe/Berlin")
    assert converted["formatted"] == "14:00 CEST"
    assert "strftime" in err(cal, "format_date", date="2024-03-10", format="YYYY-MM-DD")


# ---------------------------------------------------------------- DST transitions


def test_new_york_spring_forward_2024_03_10(cal: dict[str, Tool]) -> None:
    ny = "America/New_York"
    # 01:30 EST + 1 hour of elapsed time is 03:30 EDT: the 02:xx hour does not exist that night.
    moved = ok(cal, "add_time", date="2024-03-10T01:30:00", amount=1, unit="hours", timezone=ny)
    assert moved["datetime"] == "2024-03-10T03:30:00-04:00" and moved["abbreviation"] == "EDT"
    # A calendar day later is the same wall time, only 23 hours later.
    day = ok(cal, "add_time", date="2024-03-09T12:00:00", amount=1, unit="days", timezone=ny)
    assert day["datetime"] == "2024-03-10T12:00:00-04:00"
    diff = ok(
        cal,
        "date_difference",
        start_date="2024-03-09T12:00:00",
        end_date="2024-03-10T12:00:00",
        unit="hours",
        timezone=ny,
    )
    assert diff["value"] == 23
    days = ok(cal, "date_difference", start_date="2024-03-10", end_date="2024-03-11", unit="days", timezone=ny)
    assert days["value"] == 1
    # Wall times inside the gap never happened.
    message = err(cal, "get_timestamp", date="2024-03-10T02:30:00", timezone=ny)
    assert "does not exist in America/New_York" in message
    before = ok(cal, "get_timezone_info", timezone=ny, date="2024-03-10T01:59:59")
    after = ok(cal, "get_timezone_info", timezone=ny, date="2024-03-10T03:00:00")
    assert (before["abbreviation"], before["utc_offset"], before["is_dst"]) == ("EST", "-05:00", False)
    assert (after["abbreviation"], after["utc_offset"], after["is_dst"]) == ("EDT", "-04:00", True)
    assert after["dst_offset_seconds"] == 3600 and after["observes_dst_this_year"] is True
    # Calendar arithmetic that lands in the gap moves forward by the gap's length.
    gap = ok(cal, "add_time", date="2024-03-09T02:30:00", amount=1, unit="days", timezone=ny)
    assert gap["datetime"] == "2024-03-10T03:30:00-04:00"


def test_berlin_fall_back_2024_10_27(cal: dict[str, Tool]) -> None:
    berlin = "Europe/Berlin"
    hours = ok(cal, "date_difference", start_date="2024-10-27", end_date="2024-10-28", unit="hours", timezone=berlin)
    assert hours["value"] == 25
    days = ok(cal, "date_difference", start_date="2024-10-27", end_date="2024-10-28", unit="days", timezone=berlin)
    assert days["value"] == 1
    # 02:30 happens twice; the first (CEST) is meant, and one hour later is the second (CET).
    first = ok(cal, "get_timezone_info", timezone=berlin, date="2024-10-27T02:30:00")
    assert (first["abbreviation"], first["utc_offset"]) == ("CEST", "+02:00")
    again = ok(cal, "add_time", date="2024-10-27T02:30:00", amount=1, unit="hours", timezone=berlin)
    assert again["datetime"] == "2024-10-27T02:30:00+01:00" and again["abbreviation"] == "CET"
    early = ok(cal, "convert_timezone", date="2024-10-27T00:30:00Z", to_timezone=berlin)
    late = ok(cal, "convert_timezone", date="2024-10-27T01:30:00Z", to_timezone=berlin)
    assert early["result"]["datetime"] == "2024-10-27T02:30:00+02:00"
    assert late["result"]["datetime"] == "2024-10-27T02:30:00+01:00"
    start = ok(cal, "start_of_period", date="2024-10-27T15:00:00", period="day", timezone=berlin)
    end = ok(cal, "end_of_period", date="2024-10-27T15:00:00", period="day", timezone=berlin)
    assert start["datetime"] == "2024-10-27T00:00:00+02:00"
    assert end["datetime"] == "2024-10-27T23:59:59.999999+01:00"


def test_convert_timezone_known_values(cal: dict[str, Tool]) -> None:
    out = ok(
        cal,
        "convert_timezone",
        date="2024-06-01T12:00:00",
        from_timezone="America/New_York",
        to_timezone="Asia/Kolkata",
    )
    assert out["source"]["datetime"] == "2024-06-01T12:00:00-04:00"
    assert out["result"]["datetime"] == "2024-06-01T21:30:00+05:30"
    assert out["result"]["timezone"] == "Asia/Kolkata"
    assert "unknown timezone 'Moon/Base'" in err(cal, "convert_timezone", date="2024-06-01", to_timezone="Moon/Base")


def test_timezone_without_dst(cal: dict[str, Tool]) -> None:
    info = ok(cal, "get_timezone_info", timezone="Asia/Tokyo", date="2024-07-01T12:00:00")
    assert info["utc_offset"] == "+09:00" and info["utc_offset_seconds"] == 32400
    assert info["is_dst"] is False and info["observes_dst_this_year"] is False and info["abbreviation"] == "JST"


# ---------------------------------------------------------------- leap years and months


@pytest.mark.parametrize(
    ("year", "leap"), [(2024, True), (2023, False), (1900, False), (2000, True), (2100, False), (1600, True)]
)
def test_is_leap_year_known_values(cal: dict[str, Tool], year: int, leap: bool) -> None:
    data = ok(cal, "is_leap_year", year=year)
    assert data["is_leap_year"] is leap and data["days_in_year"] == (366 if leap else 365)


@pytest.mark.parametrize(
    ("year", "month", "days"),
    [(2024, 2, 29), (2023, 2, 28), (1900, 2, 28), (2000, 2, 29), (2024, 4, 30), (2024, 12, 31)],
)
def test_days_in_month_known_values(cal: dict[str, Tool], year: int, month: int, days: int) -> None:
    assert ok(cal, "get_days_in_month", year=year, month=month)["days"] == days


def test_month_and_year_arithmetic_clamps_to_month_end(cal: dict[str, Tool]) -> None:
    assert ok(cal, "add_time", date="2024-01-31", amount=1, unit="months")["date"] == "2024-02-29"
    assert ok(cal, "add_time", date="2023-01-31", amount=1, unit="months")["date"] == "2023-02-28"
    assert ok(cal, "add_time", date="2024-02-29", amount=1, unit="years")["date"] == "2025-02-28"
    assert ok(cal, "add_time", date="2024-02-29", amount=4, unit="years")["date"] == "2028-02-29"
    assert ok(cal, "subtract_time", date="2024-03-31", amount=1, unit="months")["date"] == "2024-02-29"
    assert ok(cal, "subtract_time", date="2024-03-10T00:00:00", amount=2, unit="weeks")["date"] == "2024-02-25"
    assert ok(cal, "add_time", date="2024-12-31T23:59:30Z", amount=45, unit="seconds")["datetime"] == (
        "2025-01-01T00:00:15+00:00"
    )
    assert ok(cal, "add_time", date="2024-03-01", amount=-1, unit="days")["date"] == "2024-02-29"


def test_date_difference_units_and_breakdown(cal: dict[str, Tool]) -> None:
    leap = ok(cal, "date_difference", start_date="2024-01-01", end_date="2024-03-01", unit="days")
    common = ok(cal, "date_difference", start_date="2023-01-01", end_date="2023-03-01", unit="days")
    assert (leap["value"], common["value"]) == (60, 59)
    assert ok(cal, "date_difference", start_date="2024-01-31", end_date="2024-02-29", unit="months")["value"] == 1
    assert ok(cal, "date_difference", start_date="2020-02-29", end_date="2024-02-28", unit="years")["value"] == 3
    full = ok(cal, "date_difference", start_date="2020-02-15T10:00:00", end_date="2024-03-10T12:30:15")
    assert full["breakdown"] == {"years": 4, "months": 0, "days": 24, "hours": 2, "minutes": 30, "seconds": 15}
    assert full["negative"] is False and full["total_months"] == 48
    backwards = ok(cal, "date_difference", start_date="2024-03-10", end_date="2024-03-01", unit="all")
    assert backwards["negative"] is True and backwards["total_days"] == -9
    assert backwards["breakdown"]["days"] == 9
    assert (
        ok(cal, "date_difference", start_date="2024-03-10T00:00:00", end_date="2024-03-10T00:01:30", unit="minutes")[
            "value"
        ]
        == 1.5
    )


def test_calculate_age_and_leap_day_birthdays(cal: dict[str, Tool]) -> None:
    age = ok(cal, "calculate_age", birth_date="1990-07-15", reference_date="2024-03-10")
    assert (age["years"], age["months"], age["days"]) == (33, 7, 24)
    assert age["next_birthday"] == "2024-07-15" and age["days_until_next_birthday"] == 127
    assert age["age_at_next_birthday"] == 34 and age["is_birthday_today"] is False
    leapling = ok(cal, "calculate_age", birth_date="2000-02-29", reference_date="2023-02-27")
    assert leapling["years"] == 22 and leapling["next_birthday"] == "2023-02-28"
    assert leapling["days_until_next_birthday"] == 1
    on_day = ok(cal, "calculate_age", birth_date="2000-02-29", reference_date="2024-02-29")
    assert on_day["years"] == 24 and on_day["is_birthday_today"] is True and on_day["days_until_next_birthday"] == 0
    default_today = ok(cal, "calculate_age", birth_date="2000-03-10")
    assert default_today["years"] == 24 and default_today["is_birthday_today"] is True
    assert "after reference_date" in err(cal, "calculate_age", birth_date="2030-01-01", reference_date="2024-01-01")


# ---------------------------------------------------------------- weeks, weekdays, periods


def test_weekdays_and_weekends(cal: dict[str, Tool]) -> None:
    assert ok(cal, "get_weekday", date="2024-03-10")["weekday"] == "Sunday"
    new_year = ok(cal, "get_weekday", date="2000-01-01")
    assert (new_year["weekday"], new_year["iso_weekday"], new_year["day_of_year"]) == ("Saturday", 6, 1)
    assert ok(cal, "get_weekday", date="2024-12-31")["day_of_year"] == 366
    assert ok(cal, "is_weekend", date="2024-03-09")["is_weekend"] is True
    assert ok(cal, "is_weekend", date="2024-03-11")["is_weekend"] is False


@pytest.mark.parametrize(
    ("date", "iso_year", "week"),
    [("2021-01-03", 2020, 53), ("2024-12-30", 2025, 1), ("2026-01-01", 2026, 1), ("2024-03-10", 2024, 10)],
)
def test_iso_week_numbers(cal: dict[str, Tool], date: str, iso_year: int, week: int) -> None:
    data = ok(cal, "get_week_number", date=date)
    assert (data["iso_year"], data["week"]) == (iso_year, week)


def test_start_and_end_of_periods(cal: dict[str, Tool]) -> None:
    assert ok(cal, "start_of_period", date="2024-03-13T15:00:00", period="week")["datetime"] == (
        "2024-03-11T00:00:00+00:00"
    )
    assert ok(cal, "end_of_period", date="2024-03-13", period="week")["datetime"] == "2024-03-17T23:59:59.999999+00:00"
    assert ok(cal, "start_of_period", date="2024-05-20", period="quarter")["date"] == "2024-04-01"
    assert ok(cal, "end_of_period", date="2024-05-20", period="quarter")["datetime"] == (
        "2024-06-30T23:59:59.999999+00:00"
    )
    assert ok(cal, "end_of_period", date="2024-02-10", period="month")["date"] == "2024-02-29"
    assert ok(cal, "start_of_period", date="2024-08-08", period="year")["date"] == "2024-01-01"
    assert ok(cal, "end_of_period", date="2024-08-08", period="year")["date"] == "2024-12-31"
    # Start of the day on New York's short day is midnight EST; its end is in EDT.
    end_ny = ok(cal, "end_of_period", date="2024-03-10T12:00:00", period="day", timezone="America/New_York")
    assert end_ny["datetime"] == "2024-03-10T23:59:59.999999-04:00"


def test_compare_and_range(cal: dict[str, Tool]) -> None:
    same = ok(cal, "compare_dates", date1="2024-03-10T12:00:00+01:00", date2="2024-03-10T11:00:00Z")
    assert same["result"] == "equal" and same["difference_seconds"] == 0
    before = ok(cal, "compare_dates", date1="2024-03-10", date2="2024-03-11T00:00:01")
    assert before["result"] == "before" and before["difference_seconds"] == 86401
    assert ok(cal, "compare_dates", date1="2025-01-01", date2="2024-12-31")["result"] == "after"
    assert ok(cal, "is_date_in_range", date="2024-03-10", start_date="2024-03-01", end_date="2024-03-31")["in_range"]
    edge = {"date": "2024-03-31", "start_date": "2024-03-01", "end_date": "2024-03-31"}
    assert ok(cal, "is_date_in_range", **edge)["in_range"] is True
    assert ok(cal, "is_date_in_range", **edge, inclusive=False)["in_range"] is False
    assert (
        ok(cal, "is_date_in_range", date="2024-04-01", start_date="2024-03-01", end_date="2024-03-31")["in_range"]
        is False
    )
    assert "before start_date" in err(
        cal, "is_date_in_range", date="2024-03-10", start_date="2024-03-31", end_date="2024-03-01"
    )


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("2024-02-30", "day is out of range"),
        ("2023-02-29", "day is out of range"),
        ("next tuesday", "expected ISO 8601"),
        ("10/03/2024", "expected ISO 8601"),
        ("2024-03-10T25:00", "hour must be in"),
        ("", "expected ISO 8601"),
        ("2024-03-10T10:00+25:00", "invalid UTC offset"),
    ],
)
def test_invalid_dates_become_error_outputs_naming_the_value(cal: dict[str, Tool], value: str, fragment: str) -> None:
    message = err(cal, "get_weekday", date=value)
    assert fragment in message
    if value:
        assert repr(value) in message


def test_invalid_years_months_and_zones(cal: dict[str, Tool]) -> None:
    assert "invalid year 0" in err(cal, "is_leap_year", year=0)
    assert "invalid year 10000" in err(cal, "get_days_in_month", year=10000, month=1)
    assert "invalid month 13" in err(cal, "get_days_in_month", year=2024, month=13)
    assert "unknown timezone '../../etc/passwd'" in err(cal, "current_datetime", timezone="../../etc/passwd")
    assert "unknown timezone" in err(cal, "get_timezone_info", timezone="EST5EDT/Nope")
    assert "outside the supported years" in err(cal, "add_time", date="9999-12-31", amount=1, unit="years")
    assert "outside the supported years" in err(cal, "add_time", date="9999-12-31T23:59:59Z", amount=10, unit="seconds")
    assert "out of range" in err(cal, "convert_timezone", date="9999-12-31T23:00:00Z", to_timezone="Asia/Tokyo")
    assert "outside the supported years" in err(cal, "add_time", date="2024-01-01", amount=10**7, unit="days")


def test_schema_validation_rejects_wrong_types_before_the_tool_runs(cal: dict[str, Tool]) -> None:
    with pytest.raises(ToolInputError, match="unit"):
        cal["add_time"].validate({"date": "2024-01-01", "amount": 1, "unit": "fortnights"})
    with pytest.raises(ToolInputError, match="amount"):
        cal["add_time"].validate({"date": "2024-01-01", "amount": "soon", "unit": "days"})
    with pytest.raises(ToolInputError, match="date"):
        cal["get_weekday"].validate({})
    with pytest.raises(ToolInputError, match="period"):
        cal["start_of_period"].validate({"date": "2024-01-01", "period": "decade"})


def test_each_tool_is_a_named_function_a_test_can_call() -> None:
    """The tools are module-level functions: called directly with a toolkit's context (the resolver of
    a call's timezone argument), they give what the toolkit's tool gives."""
    from toolfork.toolkits import calendar as module

    assert [fn.__name__ for fn in module.TOOLS] == EXPECTED_TOOLS
    kit = CalendarToolkit(clock=lambda: FIXED_NOW)
    across_dst = module.date_difference(kit.context, "2024-03-09T12:00", "2024-03-10T12:00", "hours",
                                        "America/New_York")
    assert across_dst.data["value"] == 23  # the spring-forward day is 23 hours long
    tool_result = {t.name: t for t in kit.tools()}["date_difference"].invoke(
        {"start_date": "2024-03-09T12:00", "end_date": "2024-03-10T12:00", "unit": "hours",
         "timezone": "America/New_York"})
    assert tool_result.data == across_dst.data
    assert module.current_datetime(kit.context, "UTC").data["datetime"] == FIXED_NOW.isoformat()
    assert module.is_leap_year(2100).data["is_leap_year"] is False
    refused = module.get_weekday(kit.context, "2024-02-30")
    assert refused.is_error and "invalid date '2024-02-30'" in refused.as_text()
