"""IAM for the tests: each function's role as template.yaml gives it, the IAM requests an
AWS call makes (S3's hidden ListBucket check of a missing key included), and a real IAM
policy evaluator (@cloud-copilot/iam-simulate, on the Node of tests/e2e/iam_simulate,
installed by `make iam-simulate`) that decides them, conditions such as ``s3:prefix``
included."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from local_stack.resources import ACCOUNT, REGION, Resolver
from local_stack.sam_env import local_resolver
from tests.conftest import ROOT

SIMULATOR = ROOT / "tests" / "e2e" / "iam_simulate"
NODE = SIMULATOR / "node_modules" / ".bin" / "node"
#: S3 answers a GET of a missing key with 403, not 404, unless the caller may list the
#: bucket: these outcomes of a GET or HEAD need ``s3:ListBucket`` too
_MISSING = {"NoSuchKey", "404", "NotFound", "NoSuchVersion"}

#: the policies SAM attaches to a function role it generates, by what triggers them
#: (the parts a function's code or its event sources use)
_SAM_BASIC = {
    "Effect": "Allow",
    "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
    "Resource": "*",
}
_SAM_XRAY = {
    "Effect": "Allow",
    "Action": [
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "xray:GetSamplingRules",
        "xray:GetSamplingTargets",
        "xray:GetSamplingStatisticSummaries",
    ],
    "Resource": "*",
}
_SAM_SQS = {
    "Effect": "Allow",
    "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
    "Resource": "*",
}


@dataclass(frozen=True)
class Request:
    """One IAM authorisation: an action on a resource, with its condition keys."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()
    #: why it is made (the call it comes from), for messages
    why: str = field(default="", compare=False)

    def case(self, case_id: str, policies: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": case_id,
            "account": ACCOUNT,
            "action": self.action,
            "resource": self.resource,
            "context": dict(self.context),
            "policies": policies,
        }


def _statements(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _drop_novalue(value: Any) -> Any:
    """A resolved template value without the ``AWS::NoValue`` (None) entries."""
    if isinstance(value, list):
        return [_drop_novalue(v) for v in value if v is not None]
    if isinstance(value, dict):
        return {k: _drop_novalue(v) for k, v in value.items() if v is not None}
    return value


def deployed(template: dict[str, Any], parameters: dict[str, str] | None = None) -> Resolver:
    """A resolver that knows every resource's name and ARN as the local stack names them
    (what the recorded calls name), with the template's parameter defaults (a deployed
    stack) unless ``parameters`` say otherwise."""
    return local_resolver(template, parameters=dict(parameters or {}))


def _pick(resolver: Resolver, value: Any) -> Any:
    """``value`` with its ``Fn::If`` branches chosen (and nothing else resolved)."""
    if isinstance(value, list):
        return [p for v in value if (p := _pick(resolver, v)) is not None]
    if isinstance(value, dict):
        if set(value) == {"Fn::If"}:
            condition, yes, no = value["Fn::If"]
            return _pick(resolver, yes if resolver.condition(condition) else no)
        if value == {"Ref": "AWS::NoValue"}:
            return None
        return {k: _pick(resolver, v) for k, v in value.items()}
    return value


def function_policies(resolver: Resolver, function_id: str) -> list[dict[str, Any]]:
    """The identity policies of ``function_id``'s role, resolved: the role's own (an
    explicit ``Role``), or what SAM generates from ``Policies`` and the function's
    tracing and event sources."""
    template = resolver.template
    resources = template["Resources"]
    props = resources[function_id]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    policies: list[dict[str, Any]] = []

    def add(name: str, document: Any) -> None:
        document = _drop_novalue(resolver.resolve(document))
        if document.get("Statement"):
            policies.append({"name": name, "policy": {"Version": "2012-10-17", **document}})

    def managed(ref: Any) -> None:
        logical = ref.get("Ref") if isinstance(ref, dict) else None
        if logical is None:
            return
        resource = resources[logical]
        condition = resource.get("Condition")
        if condition and not resolver.condition(condition):
            return
        add(logical, resource["Properties"]["PolicyDocument"])

    role = props.get("Role")
    if role is not None:
        logical = role["Fn::GetAtt"][0]
        role_props = resources[logical]["Properties"]
        for policy in role_props.get("Policies", []):
            add(policy["PolicyName"], policy["PolicyDocument"])
        for ref in _pick(resolver, role_props.get("ManagedPolicyArns", [])):
            managed(ref)
        return policies
    for n, entry in enumerate(props.get("Policies", [])):
        entry = _pick(resolver, entry)
        if entry is None:
            continue
        if isinstance(entry, dict) and "Statement" in entry:
            add(f"{function_id}Policy{n}", {"Statement": entry["Statement"]})
        else:
            managed(entry)
    add("AWSLambdaBasicExecutionRole", {"Statement": [_SAM_BASIC]})
    if props.get("Tracing", globals_.get("Tracing")) == "Active":
        add("AWSXrayWriteOnlyAccess", {"Statement": [_SAM_XRAY]})
    if any(e["Type"] == "SQS" for e in props.get("Events", {}).values()):
        add("AWSLambdaSQSQueueExecutionRole", {"Statement": [_SAM_SQS]})
    return policies


def granted_actions(policies: list[dict[str, Any]]) -> set[str]:
    """Every action an Allow statement of ``policies`` names (as written)."""
    actions: set[str] = set()
    for policy in policies:
        for statement in _statements(policy["policy"]["Statement"]):
            if statement["Effect"] == "Allow":
                listed = statement["Action"]
                actions |= {listed} if isinstance(listed, str) else set(listed)
    return actions


def without_each_permission(
    policies: list[dict[str, Any]],
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """``policies`` with one permission taken away, each way there is: one action on one
    resource of one statement (the rest of the statement kept, split as needed)."""
    for p, policy in enumerate(policies):
        statements = _statements(policy["policy"]["Statement"])
        for n, statement in enumerate(statements):
            actions = _listed(statement["Action"])
            resources = _listed(statement["Resource"])
            for action in actions:
                for resource in resources:
                    split = [
                        {**statement, "Action": [a for a in actions if a != action]},
                        {
                            **statement,
                            "Action": [action],
                            "Resource": [r for r in resources if r != resource],
                        },
                    ]
                    kept = [x for x in split if x["Action"] and x["Resource"]]
                    changed = [*statements[:n], *kept, *statements[n + 1 :]]
                    reduced = [*policies[:p], *policies[p + 1 :]]
                    if changed:
                        document = {**policy["policy"], "Statement": changed}
                        reduced.insert(p, {**policy, "policy": document})
                    yield f"{policy['name']}[{n}] {action} on {resource}", reduced


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def platform_requests(resolver: Resolver, function_id: str) -> list[Request]:
    """What the Lambda service does with a function's role besides its code: write the
    invocation's logs to its log group, its traces (Tracing: Active), and poll its queue
    (an SQS event source mapping)."""
    template = resolver.template
    props = template["Resources"][function_id]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    why = f"the Lambda service, for {function_id}"
    out: list[Request] = []
    group = props.get("LoggingConfig", {}).get("LogGroup")
    if group is not None:
        name = resolver.resolve(group)
        stream = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:log-stream:2026/12/04/x"
        out += [
            Request("logs:CreateLogStream", stream, why=why),
            Request("logs:PutLogEvents", stream, why=why),
        ]
    if props.get("Tracing", globals_.get("Tracing")) == "Active":
        out += [
            Request(a, "*", why=why) for a in ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
        ]
    for event in props.get("Events", {}).values():
        if event["Type"] == "SQS":
            queue = resolver.resolve(event["Properties"]["Queue"])
            out += [
                Request(f"sqs:{a}", queue, why=why)
                for a in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
            ]
    return out


# -- what an AWS call needs ----------------------------------------------------------
def _s3_object(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def _queue_arn(url: str) -> str:
    *_, account, name = url.rstrip("/").split("/")
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


def _table_arn(table: str, index: str | None = None) -> str:
    arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
    return f"{arn}/index/{index}" if index else arn


def _arn(name: str, prefix: str, suffix: str = "") -> str:
    """``name`` as an ARN: itself when it is one, else ``prefix`` + name + ``suffix``."""
    return name if name.startswith("arn:") else f"{prefix}{name}{suffix}"


def requests_of(call: dict[str, Any]) -> list[Request]:
    """The IAM requests one recorded call (local_stack.aws_calls) is authorised by."""
    service, operation, params = call["service"], call["operation"], call["params"]
    why = f"{service}.{operation} {json.dumps(params, sort_keys=True)[:200]} -> {call['outcome']}"
    out: list[Request] = []

    def add(action: str, resource: str, **context: str) -> None:
        out.append(Request(action, resource, tuple(sorted(context.items())), why))

    if service == "s3":
        bucket = params.get("Bucket", "")
        key = params.get("Key", "")
        versioned = "VersionId" in params
        if operation in ("GetObject", "HeadObject"):
            add("s3:GetObjectVersion" if versioned else "s3:GetObject", _s3_object(bucket, key))
            if call["outcome"] in _MISSING:
                add("s3:ListBucket", f"arn:aws:s3:::{bucket}", **{"s3:prefix": key})
        elif operation == "PutObject":
            add("s3:PutObject", _s3_object(bucket, key))
        elif operation == "CopyObject":
            source = unquote(str(params.get("CopySource", "")).lstrip("/"))
            source_bucket, _, source_key = source.partition("/")
            add("s3:GetObject", _s3_object(source_bucket, source_key.split("?")[0]))
            add("s3:PutObject", _s3_object(bucket, key))
        elif operation == "DeleteObject":
            add(
                "s3:DeleteObjectVersion" if versioned else "s3:DeleteObject",
                _s3_object(bucket, key),
            )
        elif operation == "DeleteObjects":
            for item in params.get("Objects", []):
                action = "s3:DeleteObjectVersion" if "VersionId" in item else "s3:DeleteObject"
                add(action, _s3_object(bucket, item["Key"]))
        elif operation in ("ListObjectsV2", "ListObjects"):
            add(
                "s3:ListBucket", f"arn:aws:s3:::{bucket}", **{"s3:prefix": params.get("Prefix", "")}
            )
        elif operation == "ListObjectVersions":
            prefix = params.get("Prefix", "")
            add("s3:ListBucketVersions", f"arn:aws:s3:::{bucket}", **{"s3:prefix": prefix})
        else:
            raise ValueError(f"an S3 call the IAM test does not know: {operation}")
    elif service == "dynamodb":
        if operation == "TransactWriteItems":
            kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
            kinds["ConditionCheck"] = "ConditionCheckItem"
            for item in params.get("TransactItems", []):
                for kind, body in item.items():
                    add(f"dynamodb:{kinds[kind]}", _table_arn(body["TableName"]))
        elif operation in ("BatchWriteItem", "BatchGetItem"):
            for table in params.get("Tables", []):
                add(f"dynamodb:{operation}", _table_arn(table))
        else:
            table = params.get("TableName", "")
            add(f"dynamodb:{operation}", _table_arn(table, params.get("IndexName")))
    elif service == "sqs":
        action = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}
        add(f"sqs:{action.get(operation, operation)}", _queue_arn(params.get("QueueUrl", "")))
    elif service == "lambda":
        arn = _arn(params.get("FunctionName", ""), f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:")
        add(f"lambda:{'InvokeFunction' if operation == 'Invoke' else operation}", arn)
    elif service == "ssm":
        name = params.get("Name", "")
        add(f"ssm:{operation}", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{name}")
    elif service == "secretsmanager":
        prefix = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:"
        secret = params.get("SecretId", "")
        # a name resolves to an ARN with the random suffix Secrets Manager adds
        add(f"secretsmanager:{operation}", _arn(secret, prefix, suffix="-AbCdEf"))
    elif service == "kms":
        add(f"kms:{operation}", str(params.get("KeyId", "")))
    elif service == "bedrock-runtime":
        model = params.get("modelId", "")
        add(
            "bedrock:InvokeModel",
            model
            if model.startswith("arn:")
            else (f"arn:aws:bedrock:{REGION}::foundation-model/{model}"),
        )
    else:
        raise ValueError(f"a service the IAM test does not know: {service}")
    return out


def evaluate(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each case's decision (``Allowed``, ``ImplicitlyDenied``, ``ExplicitlyDenied`` or
    ``Error`` with the evaluator's complaint), by its id."""
    if not NODE.exists():
        raise RuntimeError(f"{NODE} is missing: run `make iam-simulate`")
    done = subprocess.run(
        [str(NODE), str(SIMULATOR / "evaluate.mjs")],
        input=json.dumps({"cases": cases}),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(done.stdout))
