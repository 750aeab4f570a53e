"""``interlock ui``: serve the live web page of the sessions until Ctrl-C."""

from __future__ import annotations

import sys

from interlock import runtime
from interlock.runtime.cli.output import EXIT_OK, err, fail


def serve(host: str, port: int, token: str | None, store: str | None) -> int:
    """Print the URL (with the token a first visit needs) once listening, then serve."""

    def ready(url: str, used: str | None) -> None:
        sys.stdout.write(f"interlock ui: {url}\n")
        sys.stdout.flush()
        if used is not None and token is None:
            err.print(f"token: {used} (made for this run: any host but 127.0.0.1 "
                      "needs one; --token TOKEN chooses it)")
        err.print("serving the sessions of this folder; Ctrl-C stops it")

    try:
        runtime.serve_ui(host=host, port=port, token=token, store=store, on_ready=ready)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    return EXIT_OK
