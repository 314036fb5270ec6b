"""``python -m console``: serve the operator console on 127.0.0.1 (``make console``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from console.server import LOOPBACK, ConsoleServer
from console.target import Target

if TYPE_CHECKING:
    from collections.abc import Sequence

DEFAULT_PORT = 8400
LOCAL_ENV = "local_stack/sam-env.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m console",
        description="The operator console for one stack's memory, on 127.0.0.1 only.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--env-file", help=f"JSON of environment variables (default {LOCAL_ENV}, the local stack)"
    )
    where.add_argument(
        "--stack", help="a deployed CloudFormation stack (your shell's AWS credentials)"
    )
    where.add_argument(
        "--from-environment", action="store_true", help="the HARNESS_* variables of this shell"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"loopback port (default {DEFAULT_PORT})"
    )
    args = parser.parse_args(argv)
    env_file = None if args.stack or args.from_environment else (args.env_file or LOCAL_ENV)
    target = Target(env_file=env_file, stack=args.stack)
    try:
        server = ConsoleServer(target, args.port)
    except OSError as exc:
        print(f"console: cannot listen on {LOOPBACK}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    print(
        f"console: {server.launch_url} for {target.label} (loopback only; the link "
        "signs one browser in, once: an operator's tool, not part of the deployed API)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("console: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
