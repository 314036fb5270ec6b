"""Benchmarks (`make bench`). Ratios measured in one run; never asserted by tests."""

import os

# the library's Powertools Metrics/Logger run in-process here, outside any Lambda
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "AgentHarnessBench")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
