"""PollingResult: seed 001's fields and its validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlock.runtime.dispatch import Issue, PollingResult, Verdict

# --- PollingResult ----------------------------------------------------------------------------


def test_polling_result_json_uses_seed_keys() -> None:
    result = PollingResult(
        success=True,
        stdout="p: TECHLEAD\nv: GO\ni: []",
        exit_code=0,
        elapsed_time=3,
        poll_count=3,
        status="completed",
        completion_method="marker",
    )
    assert result.to_json() == {
        "success": True,
        "stdout": "p: TECHLEAD\nv: GO\ni: []",
        "stderr": "",
        "exitCode": 0,
        "elapsedTime": 3,
        "pollCount": 3,
        "status": "completed",
        "completionMethod": "marker",
        "verdict": None,
    }
    json.dumps(result.to_json())


def test_marker_success_with_null_exit_code() -> None:
    verdict = Verdict(role="QA", verdict="GO", issues=(Issue("L", "nit"),))
    result = PollingResult(
        success=True,
        exit_code=None,
        status="completed",
        completion_method="marker",
        verdict=verdict,
    )
    assert result.to_json()["exitCode"] is None
    assert result.to_json()["verdict"] == {
        "role": "QA",
        "verdict": "GO",
        "verdictRecognized": True,
        "issues": [{"severity": "L", "text": "nit"}],
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {"success": True, "exit_code": None, "completion_method": "exit"},
        {"success": True, "exit_code": 1, "completion_method": "exit"},
        {"success": True, "exit_code": 0, "status": "timeout", "completion_method": "timeout"},
        {"success": True, "exit_code": None, "status": "error", "completion_method": "marker"},
        {"success": False, "status": "finished"},
        {"success": False, "completion_method": "guess"},
        {"success": False, "exit_code": True},
        {"success": False, "elapsed_time": -1},
        {"success": False, "poll_count": -1},
    ],
)
def test_polling_result_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PollingResult(**kwargs)


def test_polling_result_failures_are_fine() -> None:
    for status, method in (("timeout", "timeout"), ("timeout", "idle"), ("error", "spawn")):
        PollingResult(success=False, stderr="boom", status=status, completion_method=method)  # type: ignore[arg-type]
    PollingResult(success=False, exit_code=2, status="error", completion_method="exit")
