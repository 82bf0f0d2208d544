"""SESTool (send_email through Amazon SES v2) against moto's SES, the real boto3 SDK end to end."""

from __future__ import annotations

import logging

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from toolfork.toolkits import ses as ses_module
from toolfork.toolkits.ses import SESTool
from toolfork.tools import ToolInputError, ToolOutput

REGION = "eu-west-1"
SECRET = "moto-secret-access-key-DO-NOT-LEAK-0123456789"
SENDER = "bot@example.com"


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """Credentials for moto only; no real AWS config file, profile or instance metadata is consulted."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "SES_FROM_EMAIL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAMOTOTESTKEY00000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def ses(aws_env):
    with mock_aws():
        boto3.client("sesv2", region_name=REGION).create_email_identity(EmailIdentity=SENDER)
        yield ses_backends[DEFAULT_ACCOUNT_ID][REGION]


def send(toolkit: SESTool, **args) -> ToolOutput:
    return toolkit.tools()[0].invoke(args)


def test_definition():
    tk = SESTool()
    assert [t.name for t in tk.tools()] == ["send_email"]
    schema = tk.tools()[0].to_json_schema()
    assert schema["required"] == ["to", "subject", "body"]
    assert schema["properties"]["to"]["minItems"] == 1
    assert "cannot be undone" in (tk.guidelines() or "")


def test_send_to_moto(ses):
    out = send(SESTool(SENDER), to=["ana@example.org"], subject="Report ready", body="See the attached numbers.")
    assert not out.is_error, out.as_text()
    assert len(ses.sent_messages) == 1
    message = ses.sent_messages[0]
    assert out.data == {"status": "sent", "message_id": message.id, "recipients": 1}
    assert message.source == SENDER
    assert message.destinations == {"ToAddresses": ["ana@example.org"]}
    assert (message.subject, message.body) == ("Report ready", "See the attached numbers.")


def test_cc_bcc_and_html(ses):
    out = send(
        SESTool(SENDER),
        to=["ana@example.org", "ben@example.org"],
        cc=["carl@example.org"],
        bcc=["audit@example.org"],
        subject="Hi",
        body="plain text",
        html="<p>rich <b>text</b></p>",
    )
    assert not out.is_error, out.as_text()
    assert out.data["recipients"] == 4
    message = ses.sent_messages[-1]
    assert message.destinations == {
        "ToAddresses": ["ana@example.org", "ben@example.org"],
        "CcAddresses": ["carl@example.org"],
        "BccAddresses": ["audit@example.org"],
    }
    assert message.body == "<p>rich <b>text</b></p>"  # moto keeps the HTML part when there is one


def test_sender_from_environment_and_explicit_client(ses, monkeypatch):
    monkeypatch.setenv("SES_FROM_EMAIL", SENDER)
    client = boto3.client("sesv2", region_name=REGION)
    tk = SESTool(client=client)
    assert tk.client() is client
    assert not send(tk, to=["ana@example.org"], subject="s", body="b").is_error
    assert ses.sent_messages[-1].source == SENDER


def test_unverified_sender_is_an_error_output(ses):
    out = send(SESTool("stranger@example.com"), to=["ana@example.org"], subject="s", body="b")
    assert out.is_error
    assert out.as_text() == (
        "SES refused the email (MessageRejected): Email address not verified stranger@example.com. "
        "The sender (and, in the SES sandbox, every recipient) must be a verified identity."
    )
    assert ses.sent_messages == []


def test_no_sender_is_an_error_output(ses):
    out = send(SESTool(), to=["ana@example.org"], subject="s", body="b")
    assert out.is_error
    assert out.as_text() == "no sender address: pass from_email=... to SESTool or set SES_FROM_EMAIL"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"to": ["Ana <ana@example.org>"]}, "not a plain email address"),
        ({"to": ["ana@example.org"], "cc": ["nope"]}, "'nope'"),
        ({"to": [f"u{i}@example.org" for i in range(51)]}, "51 recipients; SES allows at most 50"),
        ({"subject": "Hi\r\nBcc: victim@example.org"}, "subject must be a single line"),
        ({"subject": "  "}, "subject must not be empty"),
        ({"body": ""}, "body must not be empty"),
    ],
)
def test_bad_input_is_refused_before_sending(ses, args, message):
    full = {"to": ["ana@example.org"], "subject": "s", "body": "b", **args}
    out = send(SESTool(SENDER), **full)
    assert out.is_error
    assert message in out.as_text()
    assert ses.sent_messages == []


def test_empty_recipient_list_fails_validation(ses):
    with pytest.raises(ToolInputError, match="to"):
        send(SESTool(SENDER), to=[], subject="s", body="b")


def test_bad_sender_at_construction():
    with pytest.raises(ValueError, match="from_email must be a plain email address"):
        SESTool("not-an-address")


def test_missing_credentials_and_region_are_error_outputs(aws_env, monkeypatch):
    # No moto here: botocore fails locally, before any network, and the tool says what to set.
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    out = send(SESTool(SENDER), to=["ana@example.org"], subject="s", body="b")
    assert out.is_error
    assert out.as_text().startswith("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    out = send(SESTool(SENDER), to=["ana@example.org"], subject="s", body="b")
    assert out.is_error
    assert out.as_text().startswith("no AWS region: set AWS_REGION or AWS_DEFAULT_REGION")


def test_the_client_never_resends_an_email(ses):
    # botocore retries a 5xx by default; SES may have sent the message already.
    assert SESTool(SENDER).client().meta.config.retries["total_max_attempts"] == 1


def test_a_new_process_gets_its_own_client(ses, monkeypatch):
    tk = SESTool(SENDER)
    first = tk.client()
    assert tk.client() is first
    monkeypatch.setattr(ses_module.os, "getpid", lambda: -1)  # as if in a forked worker
    assert tk.client() is not first


def test_secret_never_reaches_output_or_logs(ses, caplog):
    caplog.set_level(logging.DEBUG)  # botocore logs signing and requests at DEBUG
    tk = SESTool(SENDER)
    outputs = [
        send(tk, to=["ana@example.org"], subject="s", body="b"),
        send(SESTool("stranger@example.com"), to=["ana@example.org"], subject="s", body="b"),
    ]
    assert [o.is_error for o in outputs] == [False, True]
    assert caplog.records
    for out in outputs:
        assert SECRET not in repr(out.to_dict())
    assert SECRET not in caplog.text
    assert SECRET not in repr(tk)


def test_without_boto3_a_call_says_what_to_install(aws_env, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "boto3", None)  # as if the ses extra were absent
    out = send(SESTool(SENDER), to=["ana@example.org"], subject="s", body="b")
    assert out.is_error
    assert out.as_text() == "send_email needs boto3: pip install 'toolfork[ses]'"


def test_region_from_aws_region(ses, monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", REGION)
    assert not send(SESTool(SENDER), to=["ana@example.org"], subject="s", body="b").is_error
    assert len(ses.sent_messages) == 1  # landed in REGION's backend
