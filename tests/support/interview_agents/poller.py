"""A fake poller agent for the interview tests: answers like the offline demo questioner
(``interlock.runtime.agents.roles.poll``) and appends ``STAGE PID`` to --calls for each call.

--hold STAGE: at that stage, write the pid to --held and answer only once the --go file
exists (a test kills or interrupts the interview while the agent works). --fail STAGE: at
that stage, print a line on stderr and exit 3 without answering.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import yaml

from interlock.runtime.agents.roles import poll

parser = argparse.ArgumentParser()
parser.add_argument("--calls", required=True)
parser.add_argument("--hold")
parser.add_argument("--held")
parser.add_argument("--go")
parser.add_argument("--fail")
args = parser.parse_args()
prompt = sys.stdin.read()
found = re.search(r"^Interview:[ \t]*(\w+)", prompt, re.M)
stage = found.group(1) if found else "?"
with Path(args.calls).open("a") as calls:
    calls.write(f"{stage} {os.getpid()}\n")
if stage == args.hold:
    written = Path(args.held + ".tmp")
    written.write_text(f"{os.getpid()}\n")
    written.replace(args.held)  # whole, or not there at all
    while not Path(args.go).exists():  # the agent at work, until the test lets it answer
        time.sleep(0.01)
if stage == args.fail:
    print("boom: the model is unavailable", file=sys.stderr, flush=True)
    sys.exit(3)
print(yaml.safe_dump(poll(prompt), sort_keys=False) + "...", flush=True)
