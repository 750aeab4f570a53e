"""A fixture agent for invoke tests: appends its pid to --pids, waits --delay seconds,
then answers a YAML document (``v: GO``, its pid, the first line of its stdin) and exits
with --exit. --invalid prints text that is no document; --quiet prints nothing; --hang never
answers."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--pids")
parser.add_argument("--delay", type=float, default=0.0)
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--invalid", action="store_true")
parser.add_argument("--hang", action="store_true")
parser.add_argument("--quiet", action="store_true", help="answer nothing")
args = parser.parse_args()
if args.pids:
    with Path(args.pids).open("a") as pids:
        pids.write(f"{os.getpid()}\n")
prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
time.sleep(args.delay)
while args.hang:
    time.sleep(60)
if args.quiet:
    pass
elif args.invalid:
    print("this is: not: a document {")
else:
    first = prompt.splitlines()[0] if prompt else ""
    print(f"v: GO\npid: {os.getpid()}\nprompt: {first!r}\n...", flush=True)
sys.exit(args.exit)
