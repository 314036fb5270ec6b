"""Benchmarks (`make bench`). Ratios measured in one run; never asserted by tests."""

import sys
from pathlib import Path

# the library lives in the layer, as in Lambda; `python -m bench.<module>` works alone too
_LAYER = str(Path(__file__).resolve().parent.parent / "layers" / "agent_harness")
if _LAYER not in sys.path:
    sys.path.insert(0, _LAYER)
