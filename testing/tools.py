"""A scripted tool call in the CLI's own words: its tool's name and argument names.

Every CLI offers its tools in the request (name and JSON schema): claude ``Write``
(``file_path``, ``content``) and ``Bash`` (``command``), gemini ``write_file`` and
``run_shell_command``, opencode ``write`` (``filePath``) and ``bash``, codex ``shell``
(``command`` as an argv list). :func:`tool_use` picks the offered tool for a
:class:`~interlock.testing.replies.ToolCall` and fills its arguments by the schema's
property names, so one script drives every CLI.

>>> offered = {"Write": {"properties": {"file_path": {}, "content": {}}}}
>>> from interlock.testing.replies import ToolCall
>>> tool_use(ToolCall("write_file", path="a.txt", content="hi"), offered, cwd="/w")
('Write', {'file_path': '/w/a.txt', 'content': 'hi'})
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from interlock.testing.replies import ToolCall

WRITE_TOOLS = ("Write", "write", "write_file", "create_file")
SHELL_TOOLS = ("Bash", "bash", "run_shell_command", "shell", "exec_command", "local_shell")
PATH_KEYS = ("file_path", "filePath", "path", "absolute_path")
CONTENT_KEYS = ("content", "contents", "text")
COMMAND_KEYS = ("command", "cmd")


class NoSuchTool(LookupError):
    """The CLI did not offer a tool for the scripted call (read-only mode may hide it)."""


def tool_use(call: ToolCall, offered: Mapping[str, Mapping[str, Any]], *,
             cwd: str | None = None) -> tuple[str, dict[str, Any]]:
    """The (name, arguments) of the offered tool that carries out ``call``. ``offered``
    maps tool names to their JSON schema; when the CLI offered none of the known names,
    the first known name is used anyway (the CLI then refuses it, as a model's mistake)."""
    names = WRITE_TOOLS if call.kind == "write_file" else SHELL_TOOLS
    name = next((n for n in names if n in offered), names[0])
    properties = dict(offered.get(name, {}).get("properties") or {})
    if call.kind == "write_file":
        path = call.path
        if cwd and not PurePosixPath(path).is_absolute():
            path = str(PurePosixPath(cwd) / path)
        return name, {_key(properties, PATH_KEYS): path,
                      _key(properties, CONTENT_KEYS): call.content}
    key = _key(properties, COMMAND_KEYS)
    kind = (properties.get(key) or {}).get("type")
    command: Any = ["bash", "-lc", call.command] if kind == "array" else call.command
    return name, {key: command}


def _key(properties: Mapping[str, Any], candidates: tuple[str, ...]) -> str:
    return next((k for k in candidates if k in properties), candidates[0])
