"""The `sam local --env-vars` file: each function's template variables, resolved to the
embedded AWS of `make moto`. SAM CLI only overrides variables the template declares,
which is why template.yaml declares AWS_ENDPOINT_URL (empty in AWS).

    python -m local_stack.sam_env --write     regenerate local_stack/sam-env.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from local_stack.resources import (
    ACCOUNT,
    LOCAL_NAMES,
    PREFIX,
    REGION,
    Resolver,
    function_environment,
    function_ids,
    load_template,
)

ENV_FILE = Path(__file__).resolve().parent / "sam-env.json"
#: `sam local` runs the function in a container; with `--docker-network host` it reaches
#: the moto server of `make moto` on the host's loopback
ENDPOINT = "http://127.0.0.1:5001"


def local_resolver(
    template: dict[str, Any],
    endpoint: str = ENDPOINT,
    parameters: dict[str, str] | None = None,
) -> Resolver:
    """The names and ARNs `make moto` (and the local stack) give the template's resources,
    without creating them; a dev-mode test stack unless ``parameters`` say otherwise."""
    chosen = {"DevMode": "true", "DevModeTestStack": "true"} if parameters is None else parameters
    resolver = Resolver(template, parameters=dict(chosen))
    for logical, res in template["Resources"].items():
        kind = res["Type"]
        name = LOCAL_NAMES.get(logical, f"{PREFIX}-{logical}")
        resolver.refs[logical] = name
        arn = {
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::Serverless::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
        }.get(kind)
        if arn:
            resolver.attrs[(logical, "Arn")] = arn
        if kind == "AWS::SQS::Queue":
            resolver.refs[logical] = f"{endpoint}/{ACCOUNT}/{name}"
            resolver.attrs[(logical, "QueueName")] = name
    return resolver


def build(template: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    template = template or load_template()
    resolver = local_resolver(template)
    env = {}
    for function_id in function_ids(template):
        variables = function_environment(resolver, function_id)
        variables["AWS_ENDPOINT_URL"] = ENDPOINT
        env[function_id] = variables
    return env


def lambda_environment(function_id: str) -> dict[str, str]:
    """What a deployed container of ``function_id`` sees: its template variables (resource
    names resolved to the local ones, JWT auth, no endpoint override) plus the variables
    the Lambda runtime itself sets. Used to import handlers as a cold start would."""
    variables = build()[function_id]
    variables.pop("AWS_ENDPOINT_URL")
    variables["HARNESS_AUTH_MODE"] = "jwt"
    variables["HARNESS_REQUIRE_HTTPS"] = "true"  # outside dev mode
    return {
        **variables,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "ASIA-LOCAL",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "local",
    }


def render(env: dict[str, dict[str, str]]) -> str:
    return json.dumps(env, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write local_stack/sam-env.json")
    args = parser.parse_args(argv)
    text = render(build())
    if args.write:
        ENV_FILE.write_text(text)
        print(f"wrote {ENV_FILE}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
