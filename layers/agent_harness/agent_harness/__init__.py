"""agent_harness: long-term memory for LLM agents on Lambda, S3, DynamoDB and SQS.

The one layer package. Handlers in ``functions/`` import from here; nothing here
imports the handlers, the local stack or test code. Public entry points:

    Settings.from_env()            configuration (settings.py)
    Runtime.from_settings(...)     the composition root (runtime.py)
    api.routes.build_app(rt)       the HTTP API
    agent.turn.run_turn(...)       one agent turn
    memory.flush.flush_turns(...)  the post-turn job
    memory.consolidate.*           consolidation and its fan-out
"""

__version__ = "0.1.0"
