"""The local stack (`make dev`): never part of the layer or of a deployment.

Lambda mounts the layer at /opt/python and puts it on the path; locally the same
package is mounted from layers/agent_harness, here, before anything imports it.
"""

import sys
from pathlib import Path

LAYER = Path(__file__).resolve().parent.parent / "layers" / "agent_harness"
if str(LAYER) not in sys.path:
    sys.path.insert(0, str(LAYER))
