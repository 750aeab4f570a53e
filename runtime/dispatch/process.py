"""A sub-agent as an operating-system process group: start it, read it, stop all of it.

The command is an argv list, never a shell line, started in a new session (so it leads
its own process group) with non-blocking pipes. Its exit is watched through a pidfd, so
the dispatcher learns of it at once, even when a grandchild still holds the pipes open.
Stopping signals the whole group: SIGTERM, then SIGKILL after a grace period, and only
returns once no live process of the group is left.

Every agent gets ``INTERLOCK_DISPATCH_ID`` in its environment. A group recorded in the
store by a dispatcher that died is only signalled when one of its members still carries
that id, so a recycled process-group id is never hit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import subprocess
import termios
import tty
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from interlock.runtime.dispatch.output import Stream
from interlock.runtime.host.procfs import DISPATCH_ID_VAR, group_members

READ_SIZE = 1 << 20  # bytes per read; the pipe is enlarged to this where allowed


class SpawnError(Exception):
    """The command could not be started; the message names it and says why."""


@dataclass(frozen=True, slots=True)
class SpawnOptions:
    """How to start an agent. ``line_buffered`` runs it under ``stdbuf -oL -eL`` (C stdio
    programs then flush per line); ``use_pty`` gives it a pseudo-terminal for stdout, which
    makes most programs line-buffer (stderr stays a pipe)."""

    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # added to (and overriding) the inherited environment
    line_buffered: bool = False
    use_pty: bool = False


def _nonblocking(fd: int) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)


def _enlarge_pipe(fd: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, READ_SIZE)


def _runnable(program: str, options: SpawnOptions) -> bool:
    """Whether ``program`` names an executable: a path (taken from the agent's working
    folder when relative), or a name on the agent's PATH."""
    if "/" in program:
        path = Path(program)
        if not path.is_absolute() and options.cwd is not None:
            path = options.cwd / path
        return path.is_file() and os.access(path, os.X_OK)
    search = {**os.environ, **(options.env or {})}.get("PATH", os.defpath)
    return shutil.which(program, path=search) is not None


class AgentProcess:
    """One started agent. ``fds`` maps each still-open output stream to its descriptor."""

    def __init__(self, argv: Sequence[str], dispatch_id: str, prompt: bytes | None,
                 options: SpawnOptions) -> None:
        if not argv:
            raise SpawnError("no command given")
        self.argv = tuple(argv)
        self.dispatch_id = dispatch_id
        self.returncode: int | None = None
        command = list(self.argv)
        if options.line_buffered:
            stdbuf = shutil.which("stdbuf")
            if stdbuf is None:
                raise SpawnError("line buffering needs `stdbuf` (GNU coreutils), not found")
            # stdbuf would report a missing command as its own exit 127: check it first.
            if not _runnable(command[0], options):
                raise SpawnError(f"command not found: {self.argv[0]!r}")
            command = [stdbuf, "-oL", "-eL", *command]
        env = {**os.environ, **working_folder(options.cwd), **(options.env or {}),
               "PYTHONUNBUFFERED": "1", DISPATCH_ID_VAR: dispatch_id}
        pty_fds = os.openpty() if options.use_pty else None
        if pty_fds is not None:
            tty.setraw(pty_fds[1], termios.TCSANOW)  # no CRLF translation, no echo
        try:
            self._popen = subprocess.Popen(
                command,
                stdin=subprocess.PIPE if prompt is not None else subprocess.DEVNULL,
                stdout=pty_fds[1] if pty_fds else subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=options.cwd, env=env, start_new_session=True, bufsize=0,
                close_fds=True,
            )
        except FileNotFoundError:
            self._close_pty(pty_fds)
            raise SpawnError(f"command not found: {self.argv[0]!r}") from None
        except PermissionError:
            self._close_pty(pty_fds)
            raise SpawnError(f"permission denied running {self.argv[0]!r}") from None
        except OSError as exc:
            self._close_pty(pty_fds)
            raise SpawnError(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}") from None
        self.pid = self._popen.pid
        self.pgid = self.pid  # start_new_session: the child leads its own group
        self.pidfd = os.pidfd_open(self.pid)
        stdout_fd = self._stdout_from(pty_fds)
        assert self._popen.stderr is not None
        self.fds: dict[Stream, int] = {"stdout": stdout_fd, "stderr": self._popen.stderr.fileno()}
        for fd in self.fds.values():
            _nonblocking(fd)
            _enlarge_pipe(fd)
        self._prompt = prompt
        self.stdin_fd: int | None = None
        if prompt is not None:
            assert self._popen.stdin is not None
            self.stdin_fd = self._popen.stdin.fileno()
            _nonblocking(self.stdin_fd)

    def _stdout_from(self, pty_fds: tuple[int, int] | None) -> int:
        if pty_fds is None:
            assert self._popen.stdout is not None
            return self._popen.stdout.fileno()
        os.close(pty_fds[1])  # the child has its copy; EOF (EIO) comes when it closes it
        self._pty_master = pty_fds[0]
        return pty_fds[0]

    @staticmethod
    def _close_pty(pty_fds: tuple[int, int] | None) -> None:
        for fd in pty_fds or ():
            with contextlib.suppress(OSError):
                os.close(fd)

    # -- output -----------------------------------------------------------------------

    def read(self, stream: Stream) -> bytes | None:
        """Bytes available on ``stream`` now: ``b""`` when none yet, None at end of file
        (the descriptor is then closed and dropped from :attr:`fds`)."""
        fd = self.fds.get(stream)
        if fd is None:
            return None
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno != errno.EIO:  # EIO: a pty whose other end is all closed
                raise
            data = b""
        if data:
            return data
        self.close_stream(stream)
        return None

    def close_stream(self, stream: Stream) -> None:
        fd = self.fds.pop(stream, None)
        if fd is None:
            return
        if stream == "stdout" and getattr(self, "_pty_master", None) == fd:
            os.close(fd)
        elif stream == "stdout":
            assert self._popen.stdout is not None
            self._popen.stdout.close()
        else:
            assert self._popen.stderr is not None
            self._popen.stderr.close()

    def write_prompt(self) -> bool:
        """Write as much of the prompt as the pipe takes now; True once all is written
        (stdin is then closed, so the agent sees end of input)."""
        if self.stdin_fd is None:
            return True
        try:
            while self._prompt:
                written = os.write(self.stdin_fd, self._prompt[:65536])
                self._prompt = self._prompt[written:]
        except BlockingIOError:
            return False
        except BrokenPipeError:
            self._prompt = b""  # the agent closed its stdin; it will not read the rest
        self._close_stdin()
        return True

    def _close_stdin(self) -> None:
        if self._popen.stdin is not None and self.stdin_fd is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()
        self.stdin_fd = None

    # -- exit -------------------------------------------------------------------------

    def poll(self) -> int | None:
        """The exit status once the child has exited (negative: killed by that signal)."""
        if self.returncode is None:
            self.returncode = self._popen.poll()
        return self.returncode

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def group_alive(self) -> bool:
        """Whether the child or any live (non-zombie) member of its group remains."""
        self.poll()
        return self.returncode is None or any(True for _ in group_members(self.pgid))

    def close(self) -> None:
        """Release descriptors and reap the child (after the group was stopped)."""
        for stream in list(self.fds):
            self.close_stream(stream)
        self._close_stdin()
        with contextlib.suppress(OSError):
            os.close(self.pidfd)
        if self.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.returncode = self._popen.wait(timeout=1)


# -- the process table --------------------------------------------------------------------


def working_folder(cwd: Path | str | None) -> dict[str, str]:
    """``PWD`` for a process started in ``cwd``: an inherited one names the parent's folder,
    and some CLIs (opencode) trust ``$PWD`` over their real working folder."""
    return {"PWD": str(Path(cwd).absolute())} if cwd is not None else {}


def kill_group_now(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
