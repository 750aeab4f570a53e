"""The ``interlock`` command line (typer)."""

from interlock.runtime.cli.app import app, main

__all__ = ["app", "main"]
