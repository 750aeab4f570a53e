"""The ``interlock`` command line (typer)."""

from .app import app, main

__all__ = ["app", "main"]
