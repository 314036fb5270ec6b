"""template.yaml -> the same resources on an embedded AWS (moto), and each function's
environment resolved the way CloudFormation would resolve it.

Used by the local stack (`make dev`, `make moto`), by the integration tests and to
write the `sam local --env-vars` file, so all of them follow the template instead of
a second, hand-kept list of names and variables.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
ACCOUNT = "123456789012"
REGION = "us-east-1"
PREFIX = "agent-harness-local"

#: physical names of the template's resources in the embedded AWS
LOCAL_NAMES = {
    "WorkspaceBucket": f"{PREFIX}-workspace",
    "StateTable": f"{PREFIX}-state",
    "FlushQueue": f"{PREFIX}-flush.fifo",
    "FlushDLQ": f"{PREFIX}-flush-dlq.fifo",
    "ConsolidationQueue": f"{PREFIX}-consolidation",
    "ConsolidationDLQ": f"{PREFIX}-consolidation-dlq",
}

_TAGS = {
    "!Ref": "Ref",
    "!GetAtt": "Fn::GetAtt",
    "!Sub": "Fn::Sub",
    "!If": "Fn::If",
    "!Equals": "Fn::Equals",
    "!Not": "Fn::Not",
    "!Or": "Fn::Or",
    "!And": "Fn::And",
    "!Condition": "Condition",
    "!Select": "Fn::Select",
    "!Split": "Fn::Split",
    "!Join": "Fn::Join",
}


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that turns CloudFormation short tags into their long form."""


def _construct(tag: str):  # type: ignore[no-untyped-def]
    def build(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "!GetAtt":
                value = str(value).split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {_TAGS[tag]: value}

    return build


for _tag in _TAGS:
    _CfnLoader.add_constructor(_tag, _construct(_tag))


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_CfnLoader)


@dataclass
class Resolver:
    """Resolves the intrinsic functions the template uses, against local resources."""

    template: dict[str, Any]
    parameters: dict[str, str] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    attrs: dict[tuple[str, str], str] = field(default_factory=dict)

    def parameter(self, name: str) -> str:
        if name in self.parameters:
            return self.parameters[name]
        spec = self.template["Parameters"][name]
        default = spec.get("Default", "")
        return ",".join(default) if isinstance(default, list) else str(default)

    def broken_rules(self) -> list[str]:
        """The assertions of the template's ``Rules`` these parameters break, as
        CloudFormation would refuse the stack with them (their descriptions)."""
        broken = []
        for rule in self.template.get("Rules", {}).values():
            if "RuleCondition" in rule and not self.resolve(rule["RuleCondition"]):
                continue
            for assertion in rule.get("Assertions", []):
                if not self.resolve(assertion["Assert"]):
                    broken.append(" ".join(str(assertion.get("AssertDescription", "")).split()))
        return broken

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((key, arg),) = value.items()
        if key == "Ref":
            return self._ref(arg)
        if key == "Fn::GetAtt":
            return self.attrs[(arg[0], arg[1])]
        if key == "Fn::If":
            cond, yes, no = arg
            return self.resolve(yes if self.condition(cond) else no)
        if key == "Fn::Equals":
            return self.resolve(arg[0]) == self.resolve(arg[1])
        if key == "Fn::Not":
            return not self.resolve(arg[0])
        if key == "Fn::Or":
            return any(self.resolve(a) for a in arg)
        if key == "Fn::And":
            return all(self.resolve(a) for a in arg)
        if key == "Condition":
            return self.condition(arg)
        if key == "Fn::Sub":
            text, names = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
            return re.sub(
                r"\$\{([^}]+)\}",
                lambda m: str(names[m.group(1)]) if m.group(1) in names else self._sub(m.group(1)),
                text,
            )
        if key == "Fn::Select":
            return self.resolve(arg[1])[int(self.resolve(arg[0]))]
        if key == "Fn::Split":
            return str(self.resolve(arg[1])).split(self.resolve(arg[0]))
        if key == "Fn::Join":
            return str(self.resolve(arg[0])).join(str(v) for v in self.resolve(arg[1]))
        return {key: self.resolve(arg)}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return None
        if name in ("AWS::Region",):
            return REGION
        if name in ("AWS::AccountId",):
            return ACCOUNT
        if name == "AWS::Partition":
            return "aws"
        if name == "AWS::StackName":
            return PREFIX
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        return self.refs[name]

    def _sub(self, expr: str) -> str:
        if "." in expr:
            logical, attr = expr.split(".", 1)
            return self.attrs[(logical, attr)]
        return str(self._ref(expr))


def function_ids(template: dict[str, Any]) -> list[str]:
    return sorted(
        k for k, v in template["Resources"].items() if v["Type"] == "AWS::Serverless::Function"
    )


def function_environment(resolver: Resolver, function_id: str) -> dict[str, str]:
    """Globals + function variables, resolved; variables resolving to nothing dropped."""
    template = resolver.template
    merged = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    fn = template["Resources"][function_id]["Properties"]
    merged.update(fn.get("Environment", {}).get("Variables", {}))
    env = {}
    for name, raw in merged.items():
        value = resolver.resolve(raw)
        if value is not None:
            env[name] = str(value)
    return env


def create_resources(
    template: dict[str, Any], clients: dict[str, Any], *, visibility_timeout: int | None = None
) -> Resolver:
    """Create every bucket, table and queue of the template; return a resolver that knows
    their local names. ``visibility_timeout`` shortens queue timeouts for local runs."""
    resolver = Resolver(template)
    resources = template["Resources"]
    for logical, res in resources.items():
        props = res.get("Properties", {})
        if res["Type"] == "AWS::S3::Bucket":
            _create_bucket(clients["s3"], LOCAL_NAMES[logical], props)
            resolver.refs[logical] = LOCAL_NAMES[logical]
            resolver.attrs[(logical, "Arn")] = f"arn:aws:s3:::{LOCAL_NAMES[logical]}"
        elif res["Type"] == "AWS::DynamoDB::Table":
            arn = _create_table(clients["dynamodb"], LOCAL_NAMES[logical], props)
            resolver.refs[logical] = LOCAL_NAMES[logical]
            resolver.attrs[(logical, "Arn")] = arn
    for logical in function_ids(template):  # what the functions invoke one another by
        resolver.refs[logical] = f"{PREFIX}-{logical}"
        resolver.attrs[(logical, "Arn")] = (
            f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{PREFIX}-{logical}"
        )
    queues = {k: v for k, v in resources.items() if v["Type"] == "AWS::SQS::Queue"}
    # dead-letter queues first: the others point at them
    for logical in sorted(queues, key=lambda k: "RedrivePolicy" in queues[k]["Properties"]):
        props = resolver.resolve(queues[logical].get("Properties", {}))
        url, arn = _create_queue(clients["sqs"], LOCAL_NAMES[logical], props, visibility_timeout)
        resolver.refs[logical] = url
        resolver.attrs[(logical, "Arn")] = arn
        resolver.attrs[(logical, "QueueUrl")] = url
    return resolver


def _create_bucket(s3: Any, name: str, props: dict[str, Any]) -> None:
    s3.create_bucket(Bucket=name)
    if props.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    if "PublicAccessBlockConfiguration" in props:
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"]
        )


def _create_table(ddb: Any, name: str, props: dict[str, Any]) -> str:
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        kwargs["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    arn = ddb.create_table(**kwargs)["TableDescription"]["TableArn"]
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    return str(arn)


def _create_queue(
    sqs: Any, name: str, props: dict[str, Any], visibility_timeout: int | None
) -> tuple[str, str]:
    attributes: dict[str, str] = {}
    for prop, attr in (
        ("FifoQueue", "FifoQueue"),
        ("ContentBasedDeduplication", "ContentBasedDeduplication"),
        ("DeduplicationScope", "DeduplicationScope"),
        ("FifoThroughputLimit", "FifoThroughputLimit"),
        ("VisibilityTimeout", "VisibilityTimeout"),
        ("MessageRetentionPeriod", "MessageRetentionPeriod"),
    ):
        if prop in props:
            value = props[prop]
            attributes[attr] = str(value).lower() if isinstance(value, bool) else str(value)
    if visibility_timeout is not None:
        attributes["VisibilityTimeout"] = str(visibility_timeout)
    if "RedrivePolicy" in props:
        attributes["RedrivePolicy"] = json.dumps(props["RedrivePolicy"])
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return str(url), str(arn["QueueArn"])
