"""``interlock agents check``: whether each agent of interlock.yaml can run, before any
call."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from interlock import runtime
from interlock.machines import SpecError
from interlock.runtime.cli.output import EXIT_ERRORS, EXIT_OK, err, fail, report_diagnostics

agents_app = typer.Typer(help="The agents of interlock.yaml.", no_args_is_help=True)


@agents_app.command("check")
def check(
    names: Annotated[list[str] | None, typer.Argument(
        metavar="NAME", help="The agents to check (default: every agent under agents:, "
        "or the demo roles without any).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    ralph: Annotated[bool, typer.Option("--ralph", help="Check the five Ralph roles (a role "
                                        "with no agent is a problem).")] = False,
) -> None:
    """Check, before any call, that each agent can run: one line per agent.

    Each line names the CLI found (path, version), the credentials present, the working
    folder trusted where the CLI needs it, the model, profile or agent known where the CLI
    can tell, and the permissions it runs with; or each problem and what to do.

    Exit 0 when every agent is ready, 1 on any problem, 2 on usage errors.
    """
    try:
        checks = runtime.agents_check(names, roles=ralph)
    except SpecError as exc:
        report_diagnostics(exc.diagnostics)
        raise typer.Exit(EXIT_ERRORS) from None
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    if as_json:
        json.dump([c.to_json() for c in checks], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for found in checks:
            print(found.line())
    problems = sum(not c.ok for c in checks)
    err.print(f"{len(checks)} agent(s) checked: "
              + (f"{problems} with problems" if problems else "all ready"))
    raise typer.Exit(EXIT_ERRORS if problems else EXIT_OK)
