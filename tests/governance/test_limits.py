"""Limits: validated at construction naming the setting, merged (a tool's fields win), grouped by the
restrictions a process cannot shed, and read from the CLI form."""

from __future__ import annotations

import pytest

from toolfork.governance import Limits, LimitsError


def test_a_valid_limits_value_is_frozen_and_hashable() -> None:
    limits = Limits(memory_mb=256, cpu_s=2, file_size_mb=8, open_files=64, processes=4, network=False,
                    read_paths=["/data", "/srv/"], write_paths=("/tmp/out",))
    assert limits.cpu_s == 2.0 and limits.read_paths == ("/data", "/srv")
    assert hash(limits) == hash(Limits(**limits.set_fields()))
    with pytest.raises(Exception, match="frozen"):
        limits.memory_mb = 1  # type: ignore[misc]
    assert limits.strict and not Limits(enforce="best-effort").strict


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"memory_mb": -1}, "memory_mb=-1"),
    ({"memory_mb": 0}, "memory_mb=0"),
    ({"memory_mb": True}, "memory_mb=True"),
    ({"memory_mb": 2.5}, "memory_mb=2.5"),
    ({"cpu_s": float("inf")}, "cpu_s=inf"),
    ({"cpu_s": "2"}, "cpu_s='2'"),
    ({"open_files": -3}, "open_files=-3"),
    ({"network": "off"}, "network='off'"),
    ({"enforce": "lenient"}, "enforce='lenient'"),
    ({"memroy_mb": 256}, "unknown setting memroy_mb=256"),
    ({"read_paths": "/data"}, "read_paths='/data': give a list"),
    ({"read_paths": ["data"]}, "read_paths has 'data', which is not an absolute path"),
    ({"write_paths": [3]}, "write_paths has 3"),
])
def test_a_bad_setting_is_refused_naming_it(kwargs: dict, named: str) -> None:
    with pytest.raises(LimitsError) as caught:
        Limits(**kwargs)
    assert named in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_merged_over_lets_the_tools_own_fields_win() -> None:
    default = Limits(memory_mb=1024, cpu_s=10, network=False, enforce="best-effort")
    own = Limits(memory_mb=256, read_paths=["/data"])
    merged = own.merged_over(default)
    assert merged == Limits(memory_mb=256, cpu_s=10, network=False, read_paths=["/data"], enforce="best-effort")
    assert own.merged_over(None) is own
    assert Limits(enforce="strict").merged_over(default).strict


def test_the_restriction_key_groups_by_what_a_process_cannot_shed() -> None:
    assert Limits(memory_mb=1).restriction_key is None
    assert Limits(network=True).restriction_key is None  # allowed network is no restriction
    a = Limits(memory_mb=1, network=False, read_paths=["/b", "/a"])
    b = Limits(cpu_s=5, network=False, read_paths=["/a", "/b/"])
    assert a.restriction_key == b.restriction_key  # rlimits differ, restrictions do not
    assert a.restriction_key != Limits(network=False).restriction_key
    assert Limits(read_paths=["/a"]).restriction_key != Limits(write_paths=["/a"]).restriction_key
    groups = {a.restriction_key: "worker-1"}
    assert groups[b.restriction_key] == "worker-1"


def test_parse_reads_the_cli_form() -> None:
    parsed = Limits.parse("memory_mb=256, cpu_s=2.5,network=off,read_paths=/data:/srv,enforce=best-effort")
    assert parsed == Limits(memory_mb=256, cpu_s=2.5, network=False, read_paths=["/data", "/srv"],
                            enforce="best-effort")
    assert Limits.parse("network=on").network is True
    assert Limits.parse("") == Limits()


@pytest.mark.parametrize(("text", "named"), [
    ("memory_mb=lots", "--limits: memory_mb='lots' is not a whole number"),
    ("memory_mb=-1", "--limits: Limits: memory_mb=-1"),
    ("colour=red", "--limits: unknown limit 'colour'"),
    ("network=maybe", "--limits: network='maybe'"),
    ("memory_mb", "--limits: 'memory_mb' is not NAME=VALUE"),
    ("cpu_s=1,cpu_s=2", "cpu_s is given twice"),
    ("read_paths=data", "read_paths has 'data', which is not an absolute path"),
])
def test_parse_refuses_bad_text_naming_the_piece(text: str, named: str) -> None:
    with pytest.raises(LimitsError) as caught:
        Limits.parse(text)
    assert named in str(caught.value)
