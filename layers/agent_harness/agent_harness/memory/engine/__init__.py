"""The search engine: files indexed, ranked, cached and kept as snapshots. No model calls."""
