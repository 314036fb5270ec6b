"""The operator console: a web view of one stack's memory for the person who runs it.

    python -m console [--env-file F | --stack NAME] [--port 8400]     (``make console``)

It listens on 127.0.0.1 only and is never part of the deployed API. Every read and
write goes through the layer's own functions (``agent_harness.overview`` and the ones
the CLI calls), so the console has no rule of its own. Plain HTML rendered here, a
stylesheet and a few lines of JavaScript; every page works without them.

    target.py   where the stack is (the CLI's resolution), resolved on first use
    server.py   HTTP: routing, loopback and same-origin checks, errors as pages
    launch.py   the per-launch secret: a one-time link for a cookie every request needs
    page.py     the page frame and the small HTML helpers
    views.py    users, MEMORY.md with provenance, versions and diff, charts
    views_data.py  ledgers, search with the recall preview, operations
    views_sessions.py  sessions and a turn's recalled memory
    views_review.py    the review queue
"""
