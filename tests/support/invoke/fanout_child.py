"""A fan-out's child for invoke tests: ``fanout_child.py TIMES ITEM INDEX [options]``.

It appends ``INDEX START END`` (system-wide monotonic seconds) to TIMES just before it
answers and ends, so a test can tell how many children ran at once from what they
recorded, not from a clock of its own. --pair DIR: put a marker in DIR and wait (20 s at
most) until DIR holds two, so the first two children of a concurrency-2 fan-out provably
overlap. --pids FILE: append its pid. --wait-file PATH (when not empty): wait (30 s at
most) until PATH exists. --exit N: exit with N after answering nothing. --hang: never end.
Otherwise it answers a YAML document: its item, its index, the first line of its stdin.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("times")
parser.add_argument("item")
parser.add_argument("index", type=int)
parser.add_argument("--pair")
parser.add_argument("--pids")
parser.add_argument("--wait-file", default="")
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--hang", action="store_true")
args = parser.parse_args()
start = time.monotonic()
if args.pids:
    with Path(args.pids).open("a") as pids:
        pids.write(f"{os.getpid()}\n")
prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
if args.pair:
    folder = Path(args.pair)
    (folder / str(args.index)).touch()
    limit = start + 20.0
    while len(list(folder.iterdir())) < 2 and time.monotonic() < limit:
        time.sleep(0.005)
if args.wait_file:
    limit = time.monotonic() + 30.0
    while not Path(args.wait_file).exists() and time.monotonic() < limit:
        time.sleep(0.005)
while args.hang:
    time.sleep(60)
with Path(args.times).open("a") as times:  # one write: lines never interleave
    times.write(f"{args.index} {start} {time.monotonic()}\n")
if args.exit == 0:  # last: a complete answer may have it stopped at once
    first = prompt.splitlines()[0] if prompt else ""
    print(f"v: done\nitem: {args.item}\nindex: {args.index}\nprompt: {first!r}\n...",
          flush=True)
sys.exit(args.exit)
