"""The dispatch room's public API: every name from the package, loaded only when used."""

from __future__ import annotations

import subprocess
import sys

import interlock.runtime.dispatch as dispatch_pkg


def test_every_public_name_resolves() -> None:
    for name in dispatch_pkg.__all__:
        assert getattr(dispatch_pkg, name) is not None
    assert set(dispatch_pkg.__all__) == set(dispatch_pkg._HOME)


def test_the_verdict_module_does_not_load_the_polling_loop() -> None:
    code = ("import sys, interlock.runtime.dispatch.verdict; "
            "print(sorted(m for m in sys.modules if m.startswith('interlock')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "interlock.runtime.dispatch.polling" not in out
    assert "interlock.runtime.engine" not in out
    assert "interlock.machines" not in out
