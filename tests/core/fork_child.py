"""A fork server's child for the tests: it reads its stdin to the end, then writes its pid and arguments."""

import json
import os
import sys


def main(args: list[str]) -> int:
    sys.stdin.buffer.read()
    print(json.dumps({"pid": os.getpid(), "args": args}), flush=True)
    return 0
