"""interlock.runtime: the façade over everything that touches files, processes, clocks and
stores. The command line calls only this; so can you.

Every call is a coroutine (``interlock.runtime.sync`` has the same calls, blocking)::

    import asyncio
    from interlock import runtime

    result = asyncio.run(runtime.start("door.yaml", bindings="door_bindings.py"))
    print(result.outcome, result.active)

Names are imported on first use, so ``import interlock.runtime`` stays cheap for agent
processes that only need one room.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_MODULES: dict[str, tuple[str, ...]] = {
    "running": ("start", "create", "resume", "SessionContext", "resolve_bindings",
                "RunResult"),
    "sessions": ("cancel", "remove", "send", "status", "sessions", "log", "follow",
                 "accepted_events", "JournalEntry", "check_session_id", "SessionInfo",
                 "SessionStatus", "SendReceipt", "TimerInfo", "RunnerInfo"),
    "errors": ("InterlockError", "UsageError", "NotFound", "Conflict", "StepFailed",
               "AgentsNotReady"),
    "specs": ("validate", "Validation", "draw", "draw_session", "draw_all", "spec_schema",
              "builtin_specs", "resolve_spec", "session_chart"),
    "agents": ("agents_check", "AgentCheck", "Finding"),
    "dispatching": ("dispatch_agents", "dispatch_config", "AgentCommand", "DispatchResult",
                    "PollingConfiguration", "SpawnOptions", "ConfigError", "FlagError",
                    "parse_dispatch_config"),
    "signals": ("post_signal", "mailbox_folder", "wait_for_receipt", "consume_signals",
                "parse_signal_types",
                "PostedSignal", "Receipt", "Handled", "Rejected", "SIGNAL_TYPES"),
    "ralph": ("ralph_init", "ralph_run", "ralph_resume", "ralph_status", "ralph_poll",
              "ralph_folder", "ralph_watch", "ralph_task_report", "ralph_corrected",
              "ralph_clean", "ralph_review", "RalphResult", "RalphStatus", "TaskReview",
              "ReviewResult", "RALPH_TARGETS"),
    "inbox": ("post_message", "list_messages", "mark_message", "poll_settings",
              "serve_inbox", "set_enabled", "set_interval", "InboxConfigError", "InboxError",
              "BadRequest", "InboxMessage", "MessageStatus", "connect_inbox", "project_inbox"),
    "demo": ("run_demo", "run_demo_agent", "DemoVerdict", "DemoAnswerFormat"),
    "interview": ("review", "resume_review", "review_blocking", "resume_blocking", "staged",
                  "consume_staged", "staged_prompt", "Outcome", "load_answers",
                  "terminal_ui", "JsonLines", "ScriptedAnswers", "QueuedAnswers", "Question",
                  "task_node"),
    "views": ("invocations", "session_files", "session_file", "listening_for",
              "session_marks", "store_changes", "InvocationView", "SessionFile"),
    "serving": ("serve_app",),
    "ui": ("serve_ui", "ui_app", "UiConfig"),
}
# Where a module's names live: interlock.runtime.api.<module>, but the web page's
# (interlock ui) in its own room, above the façade's implementation (docs/architecture.md).
_HOMES: dict[str, str] = {"ui": "interlock.runtime.ui"}
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items()
                            for name in names}
_EXPORTS["sync"] = ""

if TYPE_CHECKING:
    from interlock.runtime.api import sync as sync
    from interlock.runtime.api.agents import AgentCheck as AgentCheck
    from interlock.runtime.api.agents import Finding as Finding
    from interlock.runtime.api.agents import agents_check as agents_check
    from interlock.runtime.api.demo import DemoAnswerFormat as DemoAnswerFormat
    from interlock.runtime.api.demo import DemoVerdict as DemoVerdict
    from interlock.runtime.api.demo import run_demo as run_demo
    from interlock.runtime.api.demo import run_demo_agent as run_demo_agent
    from interlock.runtime.api.dispatching import AgentCommand as AgentCommand
    from interlock.runtime.api.dispatching import ConfigError as ConfigError
    from interlock.runtime.api.dispatching import DispatchResult as DispatchResult
    from interlock.runtime.api.dispatching import FlagError as FlagError
    from interlock.runtime.api.dispatching import PollingConfiguration as PollingConfiguration
    from interlock.runtime.api.dispatching import SpawnOptions as SpawnOptions
    from interlock.runtime.api.dispatching import dispatch_agents as dispatch_agents
    from interlock.runtime.api.dispatching import dispatch_config as dispatch_config
    from interlock.runtime.api.dispatching import parse_dispatch_config as parse_dispatch_config
    from interlock.runtime.api.errors import AgentsNotReady as AgentsNotReady
    from interlock.runtime.api.errors import Conflict as Conflict
    from interlock.runtime.api.errors import InterlockError as InterlockError
    from interlock.runtime.api.errors import NotFound as NotFound
    from interlock.runtime.api.errors import StepFailed as StepFailed
    from interlock.runtime.api.errors import UsageError as UsageError
    from interlock.runtime.api.inbox import BadRequest as BadRequest
    from interlock.runtime.api.inbox import InboxConfigError as InboxConfigError
    from interlock.runtime.api.inbox import InboxError as InboxError
    from interlock.runtime.api.inbox import InboxMessage as InboxMessage
    from interlock.runtime.api.inbox import MessageStatus as MessageStatus
    from interlock.runtime.api.inbox import connect_inbox as connect_inbox
    from interlock.runtime.api.inbox import list_messages as list_messages
    from interlock.runtime.api.inbox import mark_message as mark_message
    from interlock.runtime.api.inbox import poll_settings as poll_settings
    from interlock.runtime.api.inbox import post_message as post_message
    from interlock.runtime.api.inbox import project_inbox as project_inbox
    from interlock.runtime.api.inbox import serve_inbox as serve_inbox
    from interlock.runtime.api.inbox import set_enabled as set_enabled
    from interlock.runtime.api.inbox import set_interval as set_interval
    from interlock.runtime.api.interview import JsonLines as JsonLines
    from interlock.runtime.api.interview import Outcome as Outcome
    from interlock.runtime.api.interview import Question as Question
    from interlock.runtime.api.interview import QueuedAnswers as QueuedAnswers
    from interlock.runtime.api.interview import ScriptedAnswers as ScriptedAnswers
    from interlock.runtime.api.interview import consume_staged as consume_staged
    from interlock.runtime.api.interview import load_answers as load_answers
    from interlock.runtime.api.interview import resume_blocking as resume_blocking
    from interlock.runtime.api.interview import resume_review as resume_review
    from interlock.runtime.api.interview import review as review
    from interlock.runtime.api.interview import review_blocking as review_blocking
    from interlock.runtime.api.interview import staged as staged
    from interlock.runtime.api.interview import staged_prompt as staged_prompt
    from interlock.runtime.api.interview import task_node as task_node
    from interlock.runtime.api.interview import terminal_ui as terminal_ui
    from interlock.runtime.api.ralph import RALPH_TARGETS as RALPH_TARGETS
    from interlock.runtime.api.ralph import RalphResult as RalphResult
    from interlock.runtime.api.ralph import RalphStatus as RalphStatus
    from interlock.runtime.api.ralph import ReviewResult as ReviewResult
    from interlock.runtime.api.ralph import TaskReview as TaskReview
    from interlock.runtime.api.ralph import ralph_clean as ralph_clean
    from interlock.runtime.api.ralph import ralph_corrected as ralph_corrected
    from interlock.runtime.api.ralph import ralph_folder as ralph_folder
    from interlock.runtime.api.ralph import ralph_init as ralph_init
    from interlock.runtime.api.ralph import ralph_poll as ralph_poll
    from interlock.runtime.api.ralph import ralph_resume as ralph_resume
    from interlock.runtime.api.ralph import ralph_review as ralph_review
    from interlock.runtime.api.ralph import ralph_run as ralph_run
    from interlock.runtime.api.ralph import ralph_status as ralph_status
    from interlock.runtime.api.ralph import ralph_task_report as ralph_task_report
    from interlock.runtime.api.ralph import ralph_watch as ralph_watch
    from interlock.runtime.api.running import RunResult as RunResult
    from interlock.runtime.api.running import SessionContext as SessionContext
    from interlock.runtime.api.running import create as create
    from interlock.runtime.api.running import resolve_bindings as resolve_bindings
    from interlock.runtime.api.running import resume as resume
    from interlock.runtime.api.running import start as start
    from interlock.runtime.api.serving import serve_app as serve_app
    from interlock.runtime.api.sessions import JournalEntry as JournalEntry
    from interlock.runtime.api.sessions import RunnerInfo as RunnerInfo
    from interlock.runtime.api.sessions import SendReceipt as SendReceipt
    from interlock.runtime.api.sessions import SessionInfo as SessionInfo
    from interlock.runtime.api.sessions import SessionStatus as SessionStatus
    from interlock.runtime.api.sessions import TimerInfo as TimerInfo
    from interlock.runtime.api.sessions import accepted_events as accepted_events
    from interlock.runtime.api.sessions import cancel as cancel
    from interlock.runtime.api.sessions import check_session_id as check_session_id
    from interlock.runtime.api.sessions import follow as follow
    from interlock.runtime.api.sessions import log as log
    from interlock.runtime.api.sessions import remove as remove
    from interlock.runtime.api.sessions import send as send
    from interlock.runtime.api.sessions import sessions as sessions
    from interlock.runtime.api.sessions import status as status
    from interlock.runtime.api.signals import SIGNAL_TYPES as SIGNAL_TYPES
    from interlock.runtime.api.signals import Handled as Handled
    from interlock.runtime.api.signals import PostedSignal as PostedSignal
    from interlock.runtime.api.signals import Receipt as Receipt
    from interlock.runtime.api.signals import Rejected as Rejected
    from interlock.runtime.api.signals import consume_signals as consume_signals
    from interlock.runtime.api.signals import mailbox_folder as mailbox_folder
    from interlock.runtime.api.signals import parse_signal_types as parse_signal_types
    from interlock.runtime.api.signals import post_signal as post_signal
    from interlock.runtime.api.signals import wait_for_receipt as wait_for_receipt
    from interlock.runtime.api.specs import Validation as Validation
    from interlock.runtime.api.specs import builtin_specs as builtin_specs
    from interlock.runtime.api.specs import draw as draw
    from interlock.runtime.api.specs import draw_all as draw_all
    from interlock.runtime.api.specs import draw_session as draw_session
    from interlock.runtime.api.specs import resolve_spec as resolve_spec
    from interlock.runtime.api.specs import session_chart as session_chart
    from interlock.runtime.api.specs import spec_schema as spec_schema
    from interlock.runtime.api.specs import validate as validate
    from interlock.runtime.api.views import InvocationView as InvocationView
    from interlock.runtime.api.views import SessionFile as SessionFile
    from interlock.runtime.api.views import invocations as invocations
    from interlock.runtime.api.views import listening_for as listening_for
    from interlock.runtime.api.views import session_file as session_file
    from interlock.runtime.api.views import session_files as session_files
    from interlock.runtime.api.views import session_marks as session_marks
    from interlock.runtime.api.views import store_changes as store_changes
    # The web page's names (serve_ui, ui_app, UiConfig) are not imported here even for
    # type checkers: the ui room sits beside the CLI, which must not reach it through this
    # module (the layers contract); they type as Any.

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'interlock.runtime' has no attribute {name!r}")
    if name == "sync":
        return importlib.import_module("interlock.runtime.api.sync")
    home = _HOMES.get(module, f"interlock.runtime.api.{module}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
