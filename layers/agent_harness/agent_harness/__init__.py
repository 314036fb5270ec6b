"""agent_harness: long-term memory for LLM agents on Lambda, S3, DynamoDB and SQS.

The one layer package. Handlers in ``functions/`` import from here; nothing here
imports the handlers, the local stack or test code (tests/unit/test_project_layout.py).
Where to start reading (docs/design.md#repository-layout has every module):

    settings.Settings.from_env()              configuration
    runtime.Runtime.from_settings(...)        the composition root: every seam
    ports                                     what services need from S3, DynamoDB, SQS
    api.routes.build_app(rt)                  the HTTP API
    agent.turn.run_turn(...)                  one agent turn (the hot path)
    memory.jobs.flush.run_post_turn_job(...)       the post-turn job: index, then flush
    memory.jobs.consolidate.consolidate(...)       merging the ledgers into MEMORY.md
"""

__version__ = "0.1.0"
