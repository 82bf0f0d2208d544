"""Built-in toolkits. ``TOOLKITS`` maps the names `toolfork tools --toolkit NAME` accepts to classes;
add a line to it (and the import) for each new toolkit. ``PythonInterpreter`` is not in it: its tool
runs only in an interpreter session (``PythonInterpreter.open``), never as a line of a job."""

from toolfork.toolkits._options import Default, OptionError
from toolfork.toolkits.calculator import CalculatorToolkit
from toolfork.toolkits.calendar import CalendarToolkit
from toolfork.toolkits.filesystem import FileSystemToolkit
from toolfork.toolkits.interpreter import InterpreterSession, PythonInterpreter
from toolfork.toolkits.jina import JinaToolkit
from toolfork.toolkits.ses import SESTool
from toolfork.toolkits.sql import MySQLToolkit, PostgreSQLToolkit, SQLiteToolkit
from toolfork.toolkits.supadata import SupadataYouTubeToolkit
from toolfork.toolkits.tavily import TavilyToolkit
from toolfork.toolkits.zep import ZepMemoryToolkit
from toolfork.tools.toolkit import Toolkit

TOOLKITS: dict[str, type[Toolkit]] = {
    "calculator": CalculatorToolkit,
    "calendar": CalendarToolkit,
    "filesystem": FileSystemToolkit,
    "sqlite": SQLiteToolkit,
    "postgresql": PostgreSQLToolkit,
    "mysql": MySQLToolkit,
    "tavily": TavilyToolkit,
    "jina": JinaToolkit,
    "supadata": SupadataYouTubeToolkit,
    "zep": ZepMemoryToolkit,
    "ses": SESTool,
}

__all__ = [
    "TOOLKITS",
    "CalculatorToolkit",
    "CalendarToolkit",
    "Default",
    "FileSystemToolkit",
    "InterpreterSession",
    "JinaToolkit",
    "MySQLToolkit",
    "OptionError",
    "PostgreSQLToolkit",
    "PythonInterpreter",
    "SESTool",
    "SQLiteToolkit",
    "SupadataYouTubeToolkit",
    "TavilyToolkit",
    "ZepMemoryToolkit",
]
