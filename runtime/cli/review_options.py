"""The options every command that opens the review menu takes (``interlock review``,
``interlock ralph review``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

PollerAgentOpt = Annotated[str | None, typer.Option(
    "--agent", metavar="NAME",
    help="The poller agent in interlock.yaml (default: poller, else the demo questioner).")]
AnswersOpt = Annotated[Path | None, typer.Option(
    "--answers", metavar="FILE", help="A YAML list of answers in the order asked.")]
JsonLinesOpt = Annotated[bool, typer.Option(
    "--json", help="Questions as JSON lines on stdout, answers as JSON lines on stdin.")]
