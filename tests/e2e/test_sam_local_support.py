"""`make moto` (the embedded AWS alone) serves what local_stack/sam-env.json promises the
SAM CLI: the same bucket, table and queue URLs, at the endpoint in the file."""

from __future__ import annotations

import signal
import subprocess
import sys

import boto3

from local_stack import sam_env
from tests.conftest import ROOT
from tests.e2e.conftest import free_port


def test_make_moto_serves_the_resources_of_the_env_vars_file() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "local_stack", "--aws-only", "--moto-port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = []
        for line in process.stdout:
            banner.append(line)
            if "local stack ready" in line:
                break
        assert "handlers: not started (--aws-only)" in "".join(banner)

        endpoint = f"http://127.0.0.1:{port}"
        expected = {
            k: v.replace(sam_env.ENDPOINT, endpoint)
            for k, v in sam_env.build()["AgentCallFunction"].items()
        }
        clients = {
            name: boto3.client(
                name,
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="local",
                aws_secret_access_key="local",
            )
            for name in ("s3", "dynamodb", "sqs")
        }
        clients["s3"].head_bucket(Bucket=expected["HARNESS_BUCKET"])
        versioning = clients["s3"].get_bucket_versioning(Bucket=expected["HARNESS_BUCKET"])
        assert versioning["Status"] == "Enabled"
        table = clients["dynamodb"].describe_table(TableName=expected["HARNESS_TABLE"])["Table"]
        assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["due-index"]
        for variable in ("HARNESS_FLUSH_QUEUE_URL", "HARNESS_CONSOLIDATION_QUEUE_URL"):
            name = expected[variable].rsplit("/", 1)[1]
            assert clients["sqs"].get_queue_url(QueueName=name)["QueueUrl"] == expected[variable]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
    assert process.returncode == 0
