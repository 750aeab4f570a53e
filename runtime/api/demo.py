"""The offline demo and its demo agents through the façade."""

from __future__ import annotations

from interlock.runtime.agents.demo import AnswerFormat as DemoAnswerFormat
from interlock.runtime.agents.demo import run_demo_agent
from interlock.runtime.builtin.demo import run_demo
from interlock.runtime.dispatch.verdict import VerdictValue as DemoVerdict

__all__ = ["DemoAnswerFormat", "DemoVerdict", "run_demo", "run_demo_agent"]
