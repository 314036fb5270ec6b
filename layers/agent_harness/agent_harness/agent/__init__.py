"""One agent turn: lease, context, memory injection, model loop, thread log, post-turn job."""
