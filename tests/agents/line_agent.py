#!/usr/bin/env python3
"""A scripted CLI "agent" for tests of `transcript-otel run -- CMD` (stdlib only).

    python tests/agents/line_agent.py FORMAT [--exit N] [--stderr TEXT] [--binary] [--huge-line]
                                             [--sleep-before-exit S] [--wait-for-signal]

In this order, it:

1. prints `tests/fixtures/line_streams/<FORMAT's file>` to stdout byte for byte, one line
   at a time, flushing each and sleeping `LINE_DELAY_S` between lines;
2. writes TEXT to stderr as given, with no newline added (`--stderr`);
3. prints one line of `BINARY_BYTES` seeded random bytes that are not UTF-8 (`--binary`;
   the same bytes on every run, never `\\n` or `\\r` among them);
4. prints one line of `HUGE_LINE_BYTES` `x`s (`--huge-line`);
5. sleeps S seconds (`--sleep-before-exit`);
6. with `--wait-for-signal`, blocks until one of `EXIT_SIGNALS` arrives (SIGTERM, SIGINT,
   SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2), writes `got signal N` to stderr and exits with
   128 + N. They are blocked before the first line is printed (and reset from an inherited
   SIG_IGN), so one sent after that line is never lost;
7. otherwise exits with N (`--exit`, default 0).

If the reader closes stdout early, the rest of stdout is discarded and the steps go on.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import BinaryIO, Final

FIXTURES: Final = Path(__file__).resolve().parent.parent / "fixtures" / "line_streams"
FORMATS: Final = {
    "rtf1": "rtf1.txt",
    "codex-json": "codex-json.jsonl",
    "codex-json-failed": "codex-json-failed.jsonl",
    "claude-stream-json": "claude-stream-json.jsonl",
    "plain": "plain.txt",
}
LINE_DELAY_S: Final = 0.001
BINARY_BYTES: Final = 200
BINARY_SEED: Final = 20240601
HUGE_LINE_BYTES: Final = 10 * 1024 * 1024
EXIT_SIGNALS: Final = {
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
}


def binary_garbage() -> bytes:
    """`BINARY_BYTES` deterministic random bytes without line breaks; not valid UTF-8."""
    rng = random.Random(BINARY_SEED)
    alphabet = [b for b in range(256) if b not in b"\r\n"]
    data = bytes(rng.choice(alphabet) for _ in range(BINARY_BYTES))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    raise AssertionError("the seeded garbage happens to be valid UTF-8; change BINARY_SEED")


def fixture_lines(name: str) -> list[bytes]:
    lines = (FIXTURES / FORMATS[name]).read_bytes().splitlines(keepends=True)
    return [line if line.endswith(b"\n") else line + b"\n" for line in lines]


def write_lines(out: BinaryIO, lines: list[bytes]) -> None:
    """Print every line, flushed; returns quietly once the reader has gone."""
    try:
        for line in lines:
            out.write(line)
            out.flush()
            time.sleep(LINE_DELAY_S)
    except BrokenPipeError:
        # Point stdout at /dev/null so that the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("format", choices=sorted(FORMATS))
    parser.add_argument("--exit", type=int, default=0, metavar="N", help="exit code (default 0)")
    parser.add_argument("--stderr", metavar="TEXT", help="write TEXT (as is) to stderr after the fixture")
    parser.add_argument("--binary", action="store_true", help="print a line of non-UTF-8 bytes")
    parser.add_argument("--huge-line", action="store_true", help="print a single 10 MiB line")
    parser.add_argument("--sleep-before-exit", type=float, default=0.0, metavar="S")
    parser.add_argument(
        "--wait-for-signal", action="store_true", help="block until a signal of EXIT_SIGNALS, exit 128+N"
    )
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.wait_for_signal:
        for sig in EXIT_SIGNALS:  # an inherited SIG_IGN (e.g. `cmd &` in a script) would drop them
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, EXIT_SIGNALS)
    out = sys.stdout.buffer
    write_lines(out, fixture_lines(args.format))
    if args.stderr is not None:
        sys.stderr.write(args.stderr)
        sys.stderr.flush()
    if args.binary:
        write_lines(out, [binary_garbage() + b"\n"])
    if args.huge_line:
        write_lines(out, [b"x" * HUGE_LINE_BYTES + b"\n"])
    if args.sleep_before_exit > 0:
        time.sleep(args.sleep_before_exit)
    if args.wait_for_signal:
        signum = signal.sigwait(EXIT_SIGNALS)
        print(f"got signal {int(signum)}", file=sys.stderr, flush=True)
        return 128 + int(signum)
    code: int = args.exit
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
