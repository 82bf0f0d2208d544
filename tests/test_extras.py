"""``toolfork._extras``: a missing optional package is an ImportError that names the extra to install."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from toolfork._extras import MODULE_EXTRAS, MissingExtraError, extra_for, import_optional, missing_extra_message
from toolfork.agent.providers import Anthropic, OpenAI

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest itself depends on tomli before 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def _not_installed(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``import NAME`` fail as for a package that is not installed (None in sys.modules)."""
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def test_import_optional_names_the_feature_the_package_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch, "boto3")
    with pytest.raises(MissingExtraError) as info:
        import_optional("boto3", "SESTool")
    exc = info.value
    assert str(exc) == "SESTool needs the 'boto3' package: pip install 'toolfork[ses]'"
    assert (exc.name, exc.extra, exc.package) == ("boto3", "ses", "boto3")
    assert isinstance(exc, ModuleNotFoundError) and isinstance(exc, ImportError)  # old `except`s still work
    assert missing_extra_message(exc) == str(exc)


def test_a_submodule_is_looked_up_by_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    _not_installed(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError, match=re.escape("pip install 'toolfork[bench]'")):
        import_optional("matplotlib.pyplot")
    assert extra_for("opentelemetry.trace") == "otel" and extra_for("json") is None


def test_a_broken_installed_package_keeps_its_own_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The package is there, but one of *its* imports is missing: "install the extra" would mislead.
    (tmp_path / "half_installed_pkg").mkdir()
    (tmp_path / "half_installed_pkg" / "__init__.py").write_text("import not_there_either_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        import_optional("half_installed_pkg", "something")
    assert not isinstance(info.value, MissingExtraError) and info.value.name == "not_there_either_xyz"


def test_messages_for_errors_raised_without_the_helper() -> None:
    assert missing_extra_message(ModuleNotFoundError("No module named 'psycopg'", name="psycopg")) == (
        "the 'psycopg' package is not installed: pip install 'toolfork[postgres]'")
    already = ImportError("MySQLToolkit needs PyMySQL: pip install 'toolfork[mysql]'")
    assert missing_extra_message(already) == str(already)
    assert missing_extra_message(ModuleNotFoundError("No module named 'foo'", name="foo")) is None
    assert missing_extra_message(ValueError("x")) is None


@pytest.mark.parametrize(("provider", "module", "text"), [
    (lambda: Anthropic(api_key="k"), "anthropic", "the Anthropic provider needs the 'anthropic' package: "
                                                  "pip install 'toolfork[anthropic]'"),
    (lambda: OpenAI(api_key="k"), "openai", "the OpenAI provider needs the 'openai' package: "
                                            "pip install 'toolfork[openai]'"),
])
def test_providers_name_the_extra_when_the_sdk_is_missing(provider, module: str, text: str,  # type: ignore[no-untyped-def]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    built = provider()  # building a provider does not import the SDK: still fine without it
    _not_installed(monkeypatch, module)
    with pytest.raises(MissingExtraError) as info:
        built.client  # noqa: B018 - the first use imports the SDK
    assert str(info.value) == text


def test_the_map_agrees_with_the_extras_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower() for req in declared[extra]}

    for module, (extra, package) in MODULE_EXTRAS.items():
        assert extra in declared, f"{module}: extra {extra!r} is not in pyproject.toml"
        assert package.lower() in names(extra), f"{module}: {package!r} is not in the {extra!r} extra"
    # ...and every package of every feature extra is mapped (test and all are not features).
    mapped = {package.lower() for _, package in MODULE_EXTRAS.values()}
    for extra in set(declared) - {"test", "all"}:
        assert names(extra) <= mapped, f"extra {extra!r}: {names(extra) - mapped} missing from MODULE_EXTRAS"
