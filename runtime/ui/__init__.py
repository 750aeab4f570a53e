"""``interlock ui``: a live web page for sessions (Starlette, server-sent events), over
the façade ``interlock.runtime`` only: the sessions of a store, each session's statechart
lit as it runs, its timeline, invocations and files, the signal buttons, the Questioner's
and the review menu's questions as forms, the inbox. Scripts and styles ship in the
wheel (``static/``), no CDN, no build step (docs/ui.md)."""

from __future__ import annotations

from interlock.runtime.ui.server import UiConfig, serve_ui, ui_app

__all__ = ["UiConfig", "serve_ui", "ui_app"]
