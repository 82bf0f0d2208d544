"""Optional dependencies: which extra of ``toolfork`` brings which module, and one way to say it.

The core installs only what the executor and the tool model need; every other third-party package
comes with an extra (``pip install 'toolfork[anthropic]'``). Code that needs such a package imports it
with :func:`import_optional`, so a missing one is an ``ImportError`` that names the feature, the
package and the extra instead of a bare ``No module named 'anthropic'``; the command line turns that
(or any ``ModuleNotFoundError`` of a module listed here) into one line on stderr and exit status 2.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module -> (extra, the distribution pip installs): a top-level package, or a dotted name where one
# package's modules come from several distributions (a name is looked up by its longest listed prefix).
# Keep in step with [project.optional-dependencies] in pyproject.toml (tests/test_extras.py checks it).
MODULE_EXTRAS: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", "anthropic"),
    "openai": ("openai", "openai"),
    "ray": ("ray", "ray"),
    "cloudpickle": ("ray", "cloudpickle"),
    "psycopg": ("postgres", "psycopg"),
    "pymysql": ("mysql", "PyMySQL"),
    "httpx": ("web", "httpx"),
    "pypdf": ("files", "pypdf"),
    "bs4": ("files", "beautifulsoup4"),
    "boto3": ("ses", "boto3"),
    "botocore": ("ses", "boto3"),
    "opentelemetry": ("otel", "opentelemetry-api"),
    "opentelemetry.sdk": ("prometheus", "opentelemetry-sdk"),
    "opentelemetry.exporter.prometheus": ("prometheus", "opentelemetry-exporter-prometheus"),
    "opentelemetry.exporter.otlp": ("otlp", "opentelemetry-exporter-otlp-proto-http"),
    "prometheus_client": ("prometheus", "prometheus-client"),
    "pebble": ("bench", "pebble"),
    "loky": ("bench", "loky"),
    "mpire": ("bench", "mpire"),
    "matplotlib": ("bench", "matplotlib"),
    "mcp": ("mcp", "mcp"),
    "langgraph": ("langgraph", "langgraph"),
    "langchain_core": ("langgraph", "langchain-core"),
    "pydantic_ai": ("pydantic-ai", "pydantic-ai-slim"),
    "agents": ("openai-agents", "openai-agents"),
    "smolagents": ("smolagents", "smolagents"),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional package is not installed. ``name`` is the module, ``extra`` the toolfork extra that
    brings it; the message says what needed it and the pip command that fixes it.

    A ``ModuleNotFoundError`` (hence an ``ImportError``), so code that already catches those keeps
    working."""

    def __init__(self, module: str, feature: str | None = None) -> None:
        top = module.split(".")[0]
        extra, package = _entry(module) or (top, top)
        self.extra = extra
        self.package = package
        self.feature = feature
        fix = f"pip install 'toolfork[{extra}]'"
        if feature:
            message = f"{feature} needs the {package!r} package: {fix}"
        else:
            message = f"the {package!r} package is not installed: {fix}"
        super().__init__(message, name=top)


def _entry(module: str) -> tuple[str, str] | None:
    """``MODULE_EXTRAS``'s entry for ``module``: its longest listed dotted prefix."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        entry = MODULE_EXTRAS.get(".".join(parts[:n]))
        if entry is not None:
            return entry
    return None


def extra_for(module: str) -> str | None:
    """The extra that provides ``module`` (looked up by its longest listed dotted prefix)."""
    entry = _entry(module)
    return entry[0] if entry else None


def import_optional(module: str, feature: str | None = None) -> ModuleType:
    """``importlib.import_module(module)``, or :class:`MissingExtraError` when the package itself is
    missing. A package that is installed but fails inside (one of *its* dependencies missing, say)
    keeps its own error: hiding that behind "install the extra" would send the user the wrong way."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] == top:
            raise MissingExtraError(module, feature) from exc
        raise


def missing_extra_message(exc: BaseException) -> str | None:
    """The message to show for an exception caused by a missing optional package, else None:
    a ``MissingExtraError``; a ``ModuleNotFoundError`` of a module listed in ``MODULE_EXTRAS``
    (imported somewhere without the helper); or an ``ImportError`` whose message already gives the
    ``pip install 'toolfork[...]'`` command."""
    if isinstance(exc, MissingExtraError):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        if exc.name.split(".")[0] in MODULE_EXTRAS:
            return str(MissingExtraError(exc.name))
        return None
    if isinstance(exc, ImportError) and "pip install 'toolfork[" in str(exc):
        return str(exc)
    return None


__all__ = ["MODULE_EXTRAS", "MissingExtraError", "extra_for", "import_optional", "missing_extra_message"]
