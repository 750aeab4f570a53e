"""The orchestrator's guards and actions (specs/ralph_orchestrator.yaml).

They keep the session context and the session folder in step (and, in a parallel batch,
the tasks' git worktrees: :mod:`~interlock.runtime.ralph.isolation`); they never run an
agent.
An ``invoke_*`` entry action prepares the invocation its state makes
(``context.invocation``: its number, role, mode, task, the STEER and INFO it is given,
the role's brief); the state's ``invoke: machine: ralph_subagent`` runs it as a child
session, whose ending comes back as ``done.invoke.<role>.<final state>`` with the
subagent's context as ``output``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from interlock.machines.bindings import Bindings, Call
from interlock.runtime.agents.ralph_protocol import review_verdict
from interlock.runtime.config.ralph import IDENTITIES
from interlock.runtime.engine.agent_output import MUST_FIX_REASONS
from interlock.runtime.ralph.folder import RalphFolder, Task, now_iso, write_text
from interlock.runtime.ralph.isolation import Isolation
from interlock.runtime.ralph.state import (
    Brief,
    Buffered,
    Invocation,
    Merge,
    OrchestratorContext,
    Replan,
    SubagentContext,
    TaskRef,
    TaskResult,
    guard,
    spent,
    typed,
)

ORCHESTRATOR = IDENTITIES["orchestrator"]
Ctx = MutableMapping[str, Any]
State = OrchestratorContext


def _for_orchestrator(data: Any) -> bool:
    target = (data or {}).get("target") or "ALL"
    return target in ("ALL", ORCHESTRATOR)


def make_bindings(folder: RalphFolder,
                  over_limit: Callable[[Ctx], bool] | None = None,
                  asks_corrections: Callable[[], bool] | None = None,
                  parallel: int = 1, isolation: Isolation | None = None) -> Bindings:
    """The bindings of one Ralph session's orchestrator; ``over_limit`` says whether the
    engine's limits forbid another invocation (None: no limits), ``asks_corrections``
    whether rejected tasks wait for the human's correction (None: never); ``parallel``
    tasks of a batch run at once, each where ``isolation`` puts it (None: the project
    folder). Each works on the typed context
    (:class:`~interlock.runtime.ralph.state.OrchestratorContext`)."""
    place = isolation or Isolation(folder, worktrees=False)

    def invocation(s: State, role: str, mode: str, task: TaskRef | None = None,
                   brief: Brief | None = None, workdir: str = "") -> Invocation:
        """A new invocation's input, with the STEER and INFO it is given."""
        s.session_id = folder.id  # what the subagent's input names
        buffered = s.buffered.pop(IDENTITIES[role], [])
        s.invocation_seq += 1
        return Invocation(
            seq=s.invocation_seq, role=role, mode=mode, task=task, iteration=s.iteration,
            steers=[*s.steer_messages, *(b.message for b in buffered if b.type == "STEER")],
            infos=[*s.info_messages, *(b.message for b in buffered if b.type == "INFO")],
            brief=brief or Brief(), workdir=workdir)

    def invoke(s: State, role: str, mode: str, task: TaskRef | None = None,
               brief: Brief | None = None, workdir: str = "") -> None:
        """Prepare the invocation the state's invoke makes (its input)."""
        s.invocation = invocation(s, role, mode, task, brief, workdir)

    def done_invoking(s: State) -> None:
        s.invocation = None

    def absorb(c: Call, s: State, given: Invocation | None = None) -> None:
        """What the subagent learned (INFO it took itself, for every later invocation)
        and what its agent calls spent."""
        out = _output(c)
        made = given or s.invocation
        given_infos = made.infos if made is not None else []
        for info in [*given_infos, *out.learned]:
            if info not in s.info_messages:
                s.info_messages.append(info)
        s.add_spend(spent(out.calls))

    # -- signals ------------------------------------------------------------------------

    def ingest_steer(c: Call, s: State) -> None:
        if not _for_orchestrator(c.data):
            s.buffered.setdefault(c.data["target"], []).append(
                Buffered(type="STEER", message=c.data.get("message")))
            return
        s.steer_messages.append(c.data.get("message"))

    def ingest_info(c: Call, s: State) -> None:
        if not _for_orchestrator(c.data):
            s.buffered.setdefault(c.data["target"], []).append(
                Buffered(type="INFO", message=c.data.get("message")))
            return
        s.info_messages.append(c.data.get("message"))

    def hold_pause_message(c: Call, s: State) -> None:
        """A PAUSE (its message goes to the invocation made on resume): a signal, the
        ``resume`` event's message, or the PAUSE a subagent took itself."""
        data = c.data or {}
        out = _output(c)
        message = out.held_message if "output" in data else data.get("message")
        if folder.metadata().get("paused_for"):  # a failure's pause is over, or replaced
            folder.update_metadata(paused_for=None)
        if message:
            s.pause_message = message
        if "output" in data:
            if out.verified:
                s.pause_pending = True  # its work is recorded: pause now
            else:
                absorb(c, s)
                done_invoking(s)

    def note_abort(c: Call, s: State) -> None:
        s.status = "aborted"

    def record_paused(c: Call, s: State) -> None:
        s.pause_pending = False
        s.invocation = None

    def aborted_by_signal(c: Call, s: State) -> bool:
        return _output(c).blocked_reason == "aborted"

    def subagent_paused(c: Call, s: State) -> bool:
        return (c.data or {}).get("state") == "paused"

    def subagent_blocked(c: Call, s: State) -> bool:
        return (c.data or {}).get("state") == "blocked"

    def finished_work(c: Call, s: State) -> bool:
        return _output(c).verified

    def agent_to_fix(c: Call, s: State) -> bool:
        """The subagent's agent failed in a way the human fixes first (not logged in, a
        refused permission, an unknown model): another try would fail the same way."""
        return _output(c).error_reason in MUST_FIX_REASONS

    def pause_pending(c: Call, s: State) -> bool:
        return s.pause_pending

    def for_current_iteration(c: Call, s: State) -> bool:
        wanted = (c.data or {}).get("iteration")
        return wanted is None or int(wanted) == s.iteration

    def archive_stale_signal(c: Call) -> None:
        return None

    # -- planning -----------------------------------------------------------------------

    def invoke_planner(c: Call, s: State) -> None:
        folder.open_iteration(s.iteration)
        invoke(s, "planner", "plan")

    def invoke_replanner(c: Call, s: State) -> None:
        folder.open_iteration(s.iteration)
        replan = s.replan or Replan.of(s.iteration, [], list(s.blockers))
        invoke(s, "planner", "replan", brief=Brief(replan=replan, answers=s.answers or ""))

    def record_plan(c: Call, s: State) -> None:
        answer = _output(c).answer or {}
        tasks = [TaskRef(id=str(t["id"]), title=str(t.get("title", t["id"])))
                 for t in answer.get("tasks", [])]
        batches = [list(map(str, b)) for b in answer.get("batches", [])] or [
            [t.id for t in tasks]]
        s.plan_tasks, s.batches, s.batch, s.results = tasks, batches, 0, {}
        s.rejected, s.blockers, s.review_queue = [], [], []
        s.task_queue = list(batches[0]) if batches else []
        absorb(c, s)
        done_invoking(s)
        folder.write_progress(s.iteration, [Task(t.id, t.title) for t in tasks])
        write_text(folder.iteration(s.iteration) / "plan.yaml", _plan_text(tasks, batches))

    # -- executing ----------------------------------------------------------------------

    def has_next_task(c: Call, s: State) -> bool:
        return bool(s.task_queue)

    def take_next_task(c: Call, s: State) -> None:
        s.current_task = s.task(s.task_queue.pop(0))

    def invoke_executor(c: Call, s: State) -> None:
        invoke(s, "executor", "execute", s.current_task)

    # one task's outcome, whether its Executor ran alone or in a parallel batch

    def task_completed(s: State, ident: str, out: SubagentContext) -> None:
        s.results[ident] = TaskResult(status="completed", report=(out.answer or {}).get(
            "report"), blockers=list(out.blockers))
        s.review_queue.append(ident)

    def task_blocked(s: State, ident: str, out: SubagentContext, blockers: list[Any]) -> None:
        s.results[ident] = TaskResult(status="blocked", blockers=blockers,
                                      report=(out.answer or {}).get("report"))

    def task_failed(s: State, ident: str, error: str) -> None:
        s.results[ident] = TaskResult(status="failed", blockers=[error])
        folder.mark(s.iteration, ident, "F", error)

    def record_task_result(c: Call, s: State) -> None:
        task_completed(s, s.current_task.id if s.current_task is not None else "?",
                       _output(c))
        s.steer_messages = []
        s.pause_message = None
        absorb(c, s)
        done_invoking(s)

    def record_blocker(c: Call, s: State) -> None:
        out = _output(c)
        blockers = list(out.blockers or ["blocked"])
        s.blockers.extend(blockers)
        task = s.current_task
        if task is not None and s.invocation is not None and s.invocation.role == "executor":
            task_blocked(s, task.id, out, blockers)
            s.steer_messages = []
        absorb(c, s)
        done_invoking(s)

    def record_failure(c: Call, s: State) -> None:
        data = c.data or {}
        why = _output(c).error or data.get("message") or data.get("reason")
        s.blockers.append(f"invocation failed: {why}")
        role = s.invocation.role if s.invocation is not None else None
        folder.update_metadata(paused_for=f"{IDENTITIES.get(str(role), 'a subagent')} "
                               f"failed: {why} — then `interlock ralph run {folder.id}`")
        absorb(c, s)
        done_invoking(s)

    def mark_task_failed(c: Call, s: State) -> None:
        task_failed(s, s.current_task.id if s.current_task is not None else "?",
                    str(_output(c).error or "the executor failed"))
        absorb(c, s)
        done_invoking(s)

    # -- reviewing ----------------------------------------------------------------------

    def has_next_review(c: Call, s: State) -> bool:
        # only completed work is reviewed (a guard never writes: the action skips too)
        return bool(_reviewable(s))

    def take_next_review(c: Call, s: State) -> None:
        s.review_queue = _reviewable(s)
        s.current_task = s.task(s.review_queue.pop(0))

    def invoke_reviewer(c: Call, s: State) -> None:
        task = s.current_task
        invoke(s, "reviewer", "review", task,
               workdir=place.workdir(task.id) if task is not None else "")

    def record_review(c: Call, s: State) -> None:
        ident = s.current_task.id if s.current_task is not None else "?"
        verdict = review_verdict(_output(c).answer)
        if verdict != "accept":
            s.rejected.append(ident)
            folder.mark(s.iteration, ident, "F", f"review: {verdict}")
        elif place.workdir(ident):
            s.merge_queue.append(ident)  # approved: its branch merges, one at a time
        absorb(c, s)
        done_invoking(s)

    # -- parallel batches ---------------------------------------------------------------

    def runs_in_parallel(c: Call, s: State) -> bool:
        return parallel > 1 and bool(s.task_queue)

    def fork_batch(c: Call, s: State) -> None:
        """One Executor invocation per task of the batch, each in its own worktree."""
        s.parallel = parallel
        s.workers = [invocation(s, "executor", "execute", s.task(ident),
                                workdir=place.fork(ident)) for ident in s.task_queue]
        s.task_queue = []

    def worker(c: Call, s: State) -> Invocation:
        return Invocation.model_validate((c.data or {}).get("item") or {
            "seq": 0, "role": "executor", "mode": "execute"})

    def record_worker(c: Call, s: State) -> None:
        made = worker(c, s)
        task = made.task or TaskRef(id="?")
        place.settle(task.id, task.title, s.iteration)
        task_completed(s, task.id, _output(c))
        absorb(c, s, made)

    def record_worker_blocker(c: Call, s: State) -> None:
        made = worker(c, s)
        ident = made.task.id if made.task is not None else "?"
        out = _output(c)
        blockers = list(out.blockers or [out.error or "blocked"])
        s.blockers.extend(blockers)
        task_blocked(s, ident, out, blockers)
        absorb(c, s, made)

    def mark_worker_failed(c: Call, s: State) -> None:
        made = worker(c, s)
        ident = made.task.id if made.task is not None else "?"
        task_failed(s, ident, str(_output(c).error or (c.data or {}).get("message")
                                  or "the executor failed"))
        absorb(c, s, made)

    def requeue_worker(c: Call, s: State) -> None:
        """An Executor paused before its work was done: its task runs again (in its
        worktree) once the session is resumed."""
        made = worker(c, s)
        if made.task is not None:
            s.task_queue.append(made.task.id)
        absorb(c, s, made)

    def hold_worker_pause(c: Call, s: State) -> None:
        """An Executor took a PAUSE: the session pauses when the batch has ended (the
        other Executors finish their step too), with the PAUSE's message for resume."""
        s.pause_message = _output(c).held_message or s.pause_message
        s.pause_after_batch = True

    def workers_done(c: Call, s: State) -> None:
        order = [w.task.id for w in s.workers if w.task is not None]
        s.review_queue.sort(key=lambda t: order.index(t) if t in order else len(order))
        s.task_queue.sort(key=lambda t: order.index(t) if t in order else len(order))
        s.workers = []
        s.steer_messages = []
        if s.pause_after_batch:  # ORCHESTRATING's `always` pauses at the checkpoint
            s.pause_after_batch, s.pause_pending = False, True
        else:
            s.pause_message = None

    def has_next_merge(c: Call, s: State) -> bool:
        return bool(s.merge_queue)

    def take_next_merge(c: Call, s: State) -> None:
        s.merging = Merge(task=s.merge_queue.pop(0))
        s.current_task = s.task(s.merging.task)

    def merge_task(c: Call, s: State) -> None:
        assert s.merging is not None
        s.merging.conflicts = list(place.merge(s.merging.task).conflicts)

    def merge_conflicted(c: Call, s: State) -> bool:
        return s.merging is not None and bool(s.merging.conflicts)

    def invoke_merger(c: Call, s: State) -> None:
        assert s.merging is not None
        invoke(s, "merger", "merge", s.task(s.merging.task),
               Brief(conflicts=s.merging.conflicts), workdir=place.workdir(s.merging.task))

    def conclude_merge(c: Call, s: State) -> None:
        if s.merging is not None and not s.merging.conflicts:
            return
        assert s.merging is not None
        s.merging.conflicts = list(place.conclude(s.merging.task).conflicts)
        absorb(c, s)
        done_invoking(s)

    def merged(c: Call, s: State) -> None:
        s.merging = None

    def mark_merge_failed(c: Call, s: State) -> None:
        """The Merger could not resolve it: the task is [F], its branch kept, and the
        conflict a blocker the Questioner asks the human about."""
        assert s.merging is not None
        task, files = s.merging.task, s.merging.conflicts or ["(unknown)"]
        place.give_up(task, files)
        why = f"merge conflict: {', '.join(files)}"
        task_failed(s, task, why)
        s.blockers.append(f"{task}: {why}")
        if s.invocation is not None:
            absorb(c, s)
            done_invoking(s)
        s.merging = None

    def record_review_failure(c: Call, s: State) -> None:
        s.rejected.append(s.current_task.id if s.current_task is not None else "?")
        absorb(c, s)
        done_invoking(s)

    # -- questions ----------------------------------------------------------------------

    def has_open_blockers(c: Call, s: State) -> bool:
        return bool(_open_blockers(s)) and not s.answers

    def invoke_questioner(c: Call, s: State) -> None:
        folder.open_iteration(s.iteration)
        invoke(s, "questioner", "ask", brief=Brief(blockers=_open_blockers(s)))

    def record_questions(c: Call, s: State) -> None:
        answer = _output(c).answer or {}
        questions = [q for q in answer.get("questions") or [] if isinstance(q, dict)]
        if not questions:  # the Questioner failed or asked nothing: ask the blockers
            questions = [{"id": f"q{k}", "kind": "text", "prompt": f"What about: {b}?",
                          "options": []}
                         for k, b in enumerate(_open_blockers(s), start=1)]
        s.questions = questions
        lines = [f"# Questions of iteration {s.iteration}", "",
                 "Answer with: interlock ralph resume "
                 f"{folder.id} --message \"...\"", ""]
        for q in questions:
            lines.append(f"- {q.get('id')}: {q.get('prompt')}")
            lines += [f"  - {o.get('key')}: {o.get('label')}" for o in q.get("options") or []]
        write_text(folder.iteration(s.iteration) / "questions.md", "\n".join(lines) + "\n")
        absorb(c, s)
        done_invoking(s)

    def note_questions(c: Call, s: State) -> None:
        folder.update_metadata(waiting_for="answers to iterations/"
                               f"{s.iteration}/questions.md")

    def record_answers(c: Call, s: State) -> None:
        message = (c.data or {}).get("message") or "(no answer given)"
        s.answers = message
        folder.update_metadata(waiting_for=None)
        path = folder.iteration(s.iteration) / "questions.md"
        if path.exists():
            write_text(path, path.read_text(encoding="utf-8") + f"\nAnswers: {message}\n")

    # -- corrections of rejected tasks (the review menu) ------------------------------

    def has_rejections_to_correct(c: Call, s: State) -> bool:
        return (asks_corrections is not None and asks_corrections()
                and bool(s.to_correct()))

    def note_corrections(c: Call, s: State) -> None:
        folder.update_metadata(waiting_for="corrections of " + ", ".join(s.to_correct())
                               + f" (interlock ralph review {folder.id} TASK)")

    def record_correction(c: Call, s: State) -> None:
        data = c.data or {}
        task = data.get("task")
        if task in s.to_correct():
            s.corrected.append(str(task))
            folder.note_correction(s.iteration, str(task), str(data.get("resolution")
                                                                or "corrected"))
        if not s.to_correct():
            folder.update_metadata(waiting_for=None)

    def skip_corrections(c: Call, s: State) -> None:
        why = (c.data or {}).get("reason") or "ralph resume"
        for task in s.to_correct():
            s.corrected.append(task)
            folder.note_correction(s.iteration, task, f"none ({why})")
        folder.update_metadata(waiting_for=None)

    def needs_replanning(c: Call, s: State) -> bool:
        failed = [i for i, r in s.results.items() if r.status != "completed"]
        return bool(failed or s.rejected or s.blockers)

    def open_iteration(c: Call, s: State) -> None:
        old = s.iteration
        remaining = _remaining(s)
        folder.close_iteration(old)
        s.iteration = old + 1
        s.replan = Replan.of(old, remaining, list(s.blockers),
                             list(dict.fromkeys(s.rejected)))
        s.blockers, s.rejected, s.results, s.task_queue, s.review_queue = [], [], {}, [], []
        s.answers, s.questions, s.corrected = None, [], []
        folder.open_iteration(old + 1)
        for name in folder.staged(old):  # knowledge not yet approved goes on, marked
            text = (folder.iteration(old) / "knowledge" / name).read_text(encoding="utf-8")
            carried = name
            if not text.startswith("---\ncarried_from:"):
                text = f"---\ncarried_from: iteration {old}\n---\n{text}"
                carried = f"carried-i{old}-{name}"
            target = folder.iteration(old + 1) / "knowledge" / carried
            if not target.exists():
                write_text(target, text)
        folder.update_metadata(iteration=old + 1)

    def has_next_batch(c: Call, s: State) -> bool:
        return s.batch + 1 < len(s.batches)

    def next_batch(c: Call, s: State) -> None:
        s.batch += 1
        s.task_queue = list(s.batches[s.batch])

    # -- knowledge ----------------------------------------------------------------------

    def has_staged_knowledge(c: Call, s: State) -> bool:
        return bool(folder.staged(s.iteration))

    def invoke_librarian_promote(c: Call, s: State) -> None:
        invoke(s, "librarian", "promote", brief=Brief(approval=s.approval or ""))

    def carry_forward_knowledge(c: Call, s: State) -> None:
        n = s.iteration
        for name in folder.staged(n):
            path = folder.iteration(n) / "knowledge" / name
            text = path.read_text(encoding="utf-8")
            if not text.startswith("---\ncarried_from:"):
                write_text(path, f"---\ncarried_from: iteration {n}\n---\n{text}")
        s.knowledge = "carried_forward"

    def record_approval(c: Call, s: State) -> None:
        s.approval = (c.data or {}).get("message") or "approved"

    def record_promotion(c: Call, s: State) -> None:
        s.knowledge = "promoted"
        absorb(c, s)
        done_invoking(s)

    def keep_staged_knowledge(c: Call, s: State) -> None:
        s.knowledge = "skipped"

    # -- abort and completion -----------------------------------------------------------

    def cancel_running_subagents(c: Call, s: State) -> None:
        s.invocation = None  # the runner stops the process group it runs

    def mark_in_progress_tasks_failed(c: Call, s: State) -> None:
        folder.edit_progress(s.iteration, lambda tasks: [
            Task(t.id, t.title, "F", "Aborted by signal") if t.marker == "/" else t
            for t in tasks])

    def mark_session_aborted(c: Call, s: State) -> None:
        s.status = "aborted"
        folder.update_metadata(state="COMPLETE", status="aborted")

    def record_completed_at(c: Call, s: State) -> None:
        folder.close_iteration(s.iteration)

    def finalize_session(c: Call, s: State) -> None:
        s.status = "aborted" if s.status == "aborted" else "completed"
        if s.status == "completed":
            place.finish()  # the merged tasks' worktrees and branches
        folder.close_iteration(s.iteration)
        folder.update_metadata(state="COMPLETE", status=s.status, completed_at=now_iso())

    def noop(c: Call) -> None:
        return None

    def limit_reached(c: Call) -> bool:
        return over_limit is not None and over_limit(c.context)

    actions = {
        "ingest_steer": ingest_steer, "ingest_info": ingest_info,
        "hold_pause_message": hold_pause_message, "note_abort": note_abort,
        "record_paused": record_paused, "invoke_questioner": invoke_questioner,
        "record_questions": record_questions, "note_questions": note_questions,
        "record_answers": record_answers, "note_corrections": note_corrections,
        "record_correction": record_correction, "skip_corrections": skip_corrections,
        "invoke_planner": invoke_planner, "invoke_replanner": invoke_replanner,
        "record_plan": record_plan, "take_next_task": take_next_task,
        "invoke_executor": invoke_executor, "record_task_result": record_task_result,
        "record_blocker": record_blocker, "record_failure": record_failure,
        "mark_task_failed": mark_task_failed, "take_next_review": take_next_review,
        "invoke_reviewer": invoke_reviewer, "record_review": record_review,
        "record_review_failure": record_review_failure, "open_iteration": open_iteration,
        "next_batch": next_batch, "invoke_librarian_promote": invoke_librarian_promote,
        "carry_forward_knowledge": carry_forward_knowledge,
        "keep_staged_knowledge": keep_staged_knowledge, "record_approval": record_approval,
        "record_promotion": record_promotion,
        "cancel_running_subagents": cancel_running_subagents,
        "mark_in_progress_tasks_failed": mark_in_progress_tasks_failed,
        "mark_session_aborted": mark_session_aborted,
        "record_completed_at": record_completed_at, "finalize_session": finalize_session,
        "fork_batch": fork_batch, "record_worker": record_worker,
        "record_worker_blocker": record_worker_blocker,
        "mark_worker_failed": mark_worker_failed, "workers_done": workers_done,
        "requeue_worker": requeue_worker, "hold_worker_pause": hold_worker_pause,
        "take_next_merge": take_next_merge, "merge_task": merge_task,
        "invoke_merger": invoke_merger, "conclude_merge": conclude_merge, "merged": merged,
        "mark_merge_failed": mark_merge_failed,
    }
    guards = {
        "aborted_by_signal": aborted_by_signal, "subagent_paused": subagent_paused,
        "subagent_blocked": subagent_blocked, "finished_work": finished_work,
        "pause_pending": pause_pending, "agent_to_fix": agent_to_fix,
        "has_open_blockers": has_open_blockers,
        "has_rejections_to_correct": has_rejections_to_correct,
        "for_current_iteration": for_current_iteration, "has_next_task": has_next_task,
        "has_next_review": has_next_review, "needs_replanning": needs_replanning,
        "has_next_batch": has_next_batch, "has_staged_knowledge": has_staged_knowledge,
        "runs_in_parallel": runs_in_parallel, "has_next_merge": has_next_merge,
        "merge_conflicted": merge_conflicted,
    }
    return {
        "record_state": noop, "archive_stale_signal": archive_stale_signal,
        "over_limit": limit_reached,
        **{name: typed(State, fn) for name, fn in actions.items()},
        **{name: guard(State, fn) for name, fn in guards.items()},
    }


def _output(c: Call) -> SubagentContext:
    """The subagent's final context, from its ``done.invoke`` event (empty otherwise)."""
    out = (c.data or {}).get("output")
    return SubagentContext.model_validate(out if isinstance(out, dict) else {})


def to_correct(ctx: Ctx) -> list[str]:
    """The tasks Reviewers rejected in the last iteration whose correction the human has
    not given yet (``corrected`` lists those done)."""
    return State.model_validate(ctx).to_correct()


def _reviewable(s: State) -> list[str]:
    """The review queue from its first completed task on (only completed work is
    reviewed)."""
    queue = list(s.review_queue)
    while queue and (s.results[queue[0]].status if queue[0] in s.results else None) \
            != "completed":
        queue.pop(0)
    return queue


def _open_blockers(s: State) -> list[str]:
    """Blockers the human has to answer: not a scope change (the replanner takes it), not
    an abort, not a failed call or gate (retried by replanning)."""
    found = [*s.blockers, *(s.replan.blockers if s.replan is not None else [])]
    return [b for b in dict.fromkeys(found)
            if not str(b).startswith(("STEER scope change:", "Aborted by signal",
                                      "invocation failed:", "gates:"))]


def _remaining(s: State) -> list[TaskRef]:
    """Tasks of the plan not completed and accepted, a scope change's new objective in
    place of its old title."""
    out = []
    for task in s.plan_tasks:
        result = s.results.get(task.id)
        if result is not None and result.status == "completed" and task.id not in s.rejected:
            continue
        title = task.title
        for blocker in result.blockers if result is not None else []:
            if str(blocker).startswith("STEER scope change:"):
                text = str(blocker).split(":", 1)[1].strip()
                title = text.split(":", 1)[1].strip() if text.lower().startswith(
                    "scope:") else text
        out.append(TaskRef(id=task.id, title=title))
    return out


def _plan_text(tasks: list[TaskRef], batches: list[list[str]]) -> str:
    import yaml

    return yaml.safe_dump({"tasks": [t.model_dump(mode="json") for t in tasks],
                           "batches": batches}, sort_keys=False)
