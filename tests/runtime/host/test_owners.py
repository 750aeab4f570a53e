"""Owner ids: one format (host:pid-start:tag), liveness by pid and start time."""

from __future__ import annotations

import doctest
import os
import socket
import subprocess

import interlock.runtime.host.owners as owners_module
from interlock.runtime.host.owners import (
    Owner,
    default_owner,
    is_owner_name,
    owner_is_dead,
    parse_owner,
)
from interlock.runtime.host.procfs import start_ticks

HOST = socket.gethostname()


def test_doctests() -> None:
    assert doctest.testmod(owners_module).failed == 0


def test_default_owner_is_this_process_with_its_start_time() -> None:
    owner = default_owner("dispatch")
    parsed = parse_owner(owner)
    assert parsed == Owner(HOST, os.getpid(), start_ticks(os.getpid()), "dispatch")
    assert owner == f"{HOST}:{os.getpid()}-{parsed.start}:dispatch"
    assert is_owner_name(owner) and not owner_is_dead(owner)
    assert parse_owner(default_owner()) is not None  # a random tag


def test_a_gone_process_is_dead_with_or_without_start_time() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert owner_is_dead(f"{HOST}:{dead.pid}:x")
    assert owner_is_dead(f"{HOST}:{dead.pid}-123:x")


def test_a_reused_pid_is_told_apart_by_its_start_time() -> None:
    me = os.getpid()
    started = start_ticks(me)
    assert started is not None
    assert not owner_is_dead(f"{HOST}:{me}-{started}:x")
    assert owner_is_dead(f"{HOST}:{me}-{int(started) + 1}:x")  # another process, same pid
    assert not owner_is_dead(f"{HOST}:{me}:x")  # an old id: the pid alone


def test_a_zombie_counts_as_dead() -> None:
    child = subprocess.Popen(["sleep", "600"])
    try:
        owner = f"{HOST}:{child.pid}-{start_ticks(child.pid)}:x"
        assert not owner_is_dead(owner)
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not reaped
        assert owner_is_dead(owner)
    finally:
        child.kill()
        child.wait()


def test_other_hosts_and_unreadable_ids_are_presumed_alive() -> None:
    assert not owner_is_dead("elsewhere.example:1:x")
    assert not owner_is_dead("no owner at all")
    assert parse_owner("host:12ab:x") is None


def test_older_consumer_claim_folders_still_parse() -> None:
    assert parse_owner(f"17-99.a1b2c3.{HOST}") == Owner(HOST, 17, "99", "a1b2c3")
    assert parse_owner("17.a1b2c3.box.example") == Owner("box.example", 17, None, "a1b2c3")


def test_owner_names_are_safe_folder_names() -> None:
    assert is_owner_name("box:1-2:consumer-ab12cd")
    for bad in ("", "../x", "a/b", "a..b", ".hidden", "x" * 201):
        assert not is_owner_name(bad)
