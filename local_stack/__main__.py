"""`make dev` / `python -m local_stack`: run the local stack until Ctrl-C."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading

from local_stack.stack import LocalStack, LocalStackConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_stack", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("LOCAL_HTTP_PORT", 3000)))
    parser.add_argument(
        "--moto-port", type=int, default=int(os.environ.get("LOCAL_MOTO_PORT", 5001))
    )
    parser.add_argument(
        "--schedule-seconds",
        type=float,
        default=float(os.environ.get("LOCAL_SCHEDULE_SECONDS", 30)),
        help="interval of the consolidation schedule (default 30)",
    )
    parser.add_argument(
        "--aws-only", action="store_true", help="run only the embedded AWS (for sam local)"
    )
    parser.add_argument(
        "--default-user",
        default=os.environ.get("LOCAL_DEFAULT_USER") or None,
        help="the user of a request without X-User-Id (default: none, a 401); for clients "
        "that cannot send headers, such as the MCP conformance suite",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=int(os.environ.get("LOCAL_CONCURRENCY", 10)),
        help="the most containers (a process each) every function runs at once; further "
        "requests wait for a free one (default 10)",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=float(os.environ.get("LOCAL_SWITCH_INTERVAL") or 0) or None,
        help="the interpreter's thread switch interval in seconds, in the stack and in every "
        "container (default: Python's, 0.005); a tiny one makes races show at once",
    )
    args = parser.parse_args(argv)

    stack = LocalStack(
        LocalStackConfig(
            http_port=args.port,
            moto_port=args.moto_port,
            schedule_seconds=args.schedule_seconds,
            aws_only=args.aws_only,
            default_user=args.default_user,
            concurrency=args.concurrency,
            switch_interval=args.switch_interval,
        )
    )
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        stack.start()
    except OSError as exc:
        print(f"cannot start the local stack: {exc} (is another one running?)", file=sys.stderr)
        return 1
    print(stack.describe(), flush=True)
    print("local stack ready", flush=True)
    # a signal may land in any thread; the main thread runs Python's handler only when it
    # runs bytecode, so it waits in short steps rather than blocking until the event
    while not done.wait(0.2):
        pass
    print("\nstopping...", flush=True)
    stack.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
