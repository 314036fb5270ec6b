"""Benchmarks (`make bench`). Ratios measured in one run; never asserted by tests."""
