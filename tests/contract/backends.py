"""The two backends every contract test runs on: the port's in-memory fake
(tests/fakes.py) and its AWS adapter on moto (resources created from template.yaml).

The adapter on moto is the reference: a contract test states what the adapter does, so
a fake that drifts from it fails here rather than letting unit tests pass on semantics
AWS does not have. Every test runs strictly on both backends.
"""

from __future__ import annotations

__all__ = ["BACKENDS"]

BACKENDS = ("fake", "moto")
