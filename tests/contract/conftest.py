"""Contract suites: every test of a port runs on its fake and on its adapter on moto.

moto is started and the bucket, table and queues are created by the integration suite's
``stack`` fixture (tests/integration/conftest.py), requested only by the moto backend.
"""

from __future__ import annotations

import pytest

from tests.contract.backends import BACKENDS
from tests.integration.conftest import stack  # noqa: F401  (fixture: moto + template resources)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``fake`` or ``moto``."""
    return str(request.param)
