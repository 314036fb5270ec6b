"""Serve the real model as an OpenAI-compatible server on 127.0.0.1 (llama.cpp's own server,
embedded by xllamacpp). Runs in the tier's venv, from the repository's root:

    .venv-model/bin/python -m tools.real_model.serve [--port N]

``--port 0`` (the default) takes a free port. Once the model is loaded and ``/health``
answers, one line ``ready http://127.0.0.1:N/v1`` goes to stdout, and nothing else does (the
server's log goes to stderr). It serves ``/v1/chat/completions`` (streaming too, and
``response_format`` by grammar) until SIGTERM or SIGINT, then stops its loop and exits 0.
Sampling is left to each request (``temperature``, ``seed``, ``max_tokens``); the server's
defaults apply to what a request leaves out. With ``tools``, this model writes its call as
JSON in the answer's content, which llama.cpp does not return as ``tool_calls``.

Prompt caching is on by default (a request reuses the evaluated prefix of the one before, as
llama.cpp does): fast for a conversation's next call, but at temperature 0 a repeated request
may then differ from its first answer in a word, since the cached and the whole evaluation
round differently. ``--no-cache-prompt`` (or ``"cache_prompt": false`` in a request)
evaluates every prompt whole: the same request, the same answer, on any server.

Nothing is downloaded: the model is the file ``make real-model`` assembled.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tools.real_model import MODEL_FILE, MODEL_NAME

if TYPE_CHECKING:
    from types import FrameType

HOST = "127.0.0.1"
CONTEXT = 4096
THREADS = 2
#: RAM for prompts cached beside the slots' own (llama.cpp's default is 8 GiB)
CACHE_RAM_MIB = 512
#: how long /health may take to answer once the model has loaded
HEALTH_TIMEOUT = 30.0


def build_params(
    model: Path,
    port: int,
    *,
    context: int,
    threads: int,
    parallel: int,
    verbosity: int,
    cache_prompt: bool = True,
) -> Any:
    """llama.cpp's server parameters (``xllamacpp.CommonParams``) for ``model`` on ``port``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {MODEL_NAME}
    params.hostnames = [HOST]
    params.port = port
    params.n_ctx = context
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True  # the model's own chat template, with tools
    params.offline = True  # never reach a model hub
    params.ui = False
    params.cache_prompt = cache_prompt  # the default of a request's own "cache_prompt"
    params.cache_ram_mib = CACHE_RAM_MIB
    params.verbosity = verbosity
    return params


def wait_healthy(base: str, timeout: float = HEALTH_TIMEOUT) -> None:
    """Return once ``GET base/health`` answers 200 ``{"status": "ok"}``."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                if response.status == 200 and json.load(response).get("status") == "ok":
                    return
                last = f"HTTP {response.status}"
        except (OSError, ValueError) as error:  # URLError is an OSError; ValueError: bad JSON
            last = str(error)
        time.sleep(0.2)
    raise RuntimeError(f"{base}/health did not answer within {timeout:.0f} s: {last}")


def _ready_stream() -> TextIO:
    """A stream on the real stdout for the ready line; fd 1 itself is pointed at stderr, so
    whatever llama.cpp or a library prints cannot reach the reader of the ready line."""
    ready = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return ready


def _parent_gone(parent: int | None) -> bool:
    return parent is not None and os.getppid() != parent


def serve(
    port: int,
    model: Path = MODEL_FILE,
    *,
    context: int = CONTEXT,
    threads: int = THREADS,
    parallel: int = 1,
    verbosity: int = 3,
    cache_prompt: bool = True,
    exit_with_parent: bool = False,
) -> int:
    if not model.is_file():
        print(f"serve: no model at {model}: run `make real-model`", file=sys.stderr)
        return 1
    parent = os.getppid() if exit_with_parent else None
    ready = _ready_stream()
    import xllamacpp

    started = time.monotonic()
    params = build_params(
        model,
        port,
        context=context,
        threads=threads,
        parallel=parallel,
        verbosity=verbosity,
        cache_prompt=cache_prompt,
    )
    # Blocks until the model is loaded; the server's thread then installs llama.cpp's own
    # SIGINT/SIGTERM handlers, which the handlers below replace (see the loop after them).
    server = xllamacpp.Server(params)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        root = str(server.listening_address).rstrip("/")  # http://127.0.0.1:N
        wait_healthy(root)
        print(f"serve: {MODEL_NAME} loaded in {time.monotonic() - started:.1f} s", file=sys.stderr)
        print(f"ready {root}/v1", file=ready, flush=True)
        while not stop.wait(1.0):
            if _parent_gone(parent):
                print("serve: the parent process is gone, stopping", file=sys.stderr)
                break
    finally:
        del server  # stops the server's loop and HTTP threads, and waits for them
        ready.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.real_model.serve",
        description="Serve the real model (llama.cpp) as an OpenAI-compatible server.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--model", type=Path, default=MODEL_FILE, help="the GGUF file")
    parser.add_argument("--context", type=int, default=CONTEXT, help="context size, tokens")
    parser.add_argument("--threads", type=int, default=THREADS, help="CPU threads")
    parser.add_argument("--parallel", type=int, default=1, help="requests decoded at once")
    parser.add_argument("--verbosity", type=int, default=3, help="llama.cpp log verbosity")
    parser.add_argument(
        "--no-cache-prompt",
        dest="cache_prompt",
        action="store_false",
        help="evaluate every prompt whole, so a request repeated gives the same answer",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the process that started this one is gone (for test helpers)",
    )
    args = parser.parse_args(argv)
    return serve(
        args.port,
        args.model,
        context=args.context,
        threads=args.threads,
        parallel=args.parallel,
        verbosity=args.verbosity,
        cache_prompt=args.cache_prompt,
        exit_with_parent=args.exit_with_parent,
    )


if __name__ == "__main__":
    sys.exit(main())
