"""Developer tools that are neither the layer nor a test: run with `python -m tools.<name>`."""
