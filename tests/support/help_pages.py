"""Print, as one JSON object, what ``interlock CMD -h`` and ``interlock CMD --help`` print
and exit with for every command given (a JSON list of argument lists), all in this one
process: the CLI's own entry point (``main``), with stdout captured per call.

    python tests/support/help_pages.py '[[], ["run"], ["inbox", "ack"]]'
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from interlock.runtime.cli import main


def page(args: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


if __name__ == "__main__":
    commands = json.loads(sys.argv[1])
    json.dump({" ".join(c): {flag: page([*c, flag]) for flag in ("-h", "--help")}
               for c in commands}, sys.stdout)
