"""Send email through Amazon SES (API v2, ``sesv2.send_email``) with boto3 (the ``ses`` extra).

boto3 is imported when the tool runs, not when this module is imported, so ``toolfork.toolkits``
works (and lists this toolkit) without the extra installed. Credentials and region come from boto3's
usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_REGION``, profiles, instance roles)
unless a ready client is passed in.

The client created here does not retry: botocore would resend ``SendEmail`` after a 5xx or a read
timeout, and SES may already have sent the message, so the recipient would get it twice. A failed send
is an error output instead (the model can decide to try again). A client passed in keeps its own
retry configuration.

Options: ``{"send_email": {"reply_to": [...], "tags": {"campaign": "q3"},
"feedback_forwarding_address": "bounces@example.com"}}``, sent with every message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

from ._options import WebOptions, address, pattern, string_map, strings

__all__ = ["SESTool", "SESToolkit"]

FROM_ENV_VAR = "SES_FROM_EMAIL"
MAX_RECIPIENTS = 50  # SES's limit on To + Cc + Bcc for one message

_ADDRESS = re.compile(r"[^@\s<>,;\"']+@[^@\s<>,;\"']+\.[^@\s<>,;\"'.]+")


_TAG = pattern(r"[A-Za-z0-9_-]{1,256}", "ASCII letters, digits, '_' and '-' (1 to 256)")


class SESTool(WebOptions, Toolkit):
    """Tool: ``send_email``. A toolkit of one, so it filters and lists like the others.

    ``from_email`` (or ``SES_FROM_EMAIL``) must be an identity verified in SES; a missing sender,
    missing credentials and every SES refusal are error outputs the model can read, never
    exceptions. ``client`` lets you pass a configured ``boto3.client("sesv2")``; otherwise one is
    created on first use in each process (a client must not be shared across ``fork()``).

    ``options={"send_email": {...}}``: ``reply_to`` (addresses replies go to), ``tags`` (name to
    value, SES message tags for event publishing) and ``feedback_forwarding_address`` (where bounces
    and complaints go), checked here (``OptionError`` names a bad one).
    """

    name = "ses"
    OPTIONS = {
        "send_email": {
            "reply_to": strings(address, max_items=MAX_RECIPIENTS, what="email addresses"),
            "tags": string_map(_TAG, _TAG),
            "feedback_forwarding_address": address,
        }
    }

    def __init__(
        self,
        from_email: str | None = None,
        *,
        client: Any = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        configuration_set: str | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._init_options(options)
        if from_email is not None and not _ADDRESS.fullmatch(from_email):
            raise ValueError(f"from_email must be a plain email address, got {from_email!r}")
        self.from_email = from_email
        self.region_name = region_name
        self.endpoint_url = endpoint_url
        self.configuration_set = configuration_set
        self._client = client
        self._client_pid: int | None = os.getpid() if client is not None else None
        self._client_given = client is not None

    def __repr__(self) -> str:
        return f"SESTool(from_email={self.from_email!r}, region_name={self.region_name!r})"

    def guidelines(self) -> str | None:
        return (
            "send_email really sends email and cannot be undone: only send when the user asked for it, "
            "to the addresses they gave, and say what you sent."
        )

    def client(self) -> Any:
        """The sesv2 client for this process (a fresh one after a fork unless one was given)."""
        if self._client is not None and (self._client_given or self._client_pid == os.getpid()):
            return self._client
        import boto3  # the optional extra: imported only when an email is actually sent
        from botocore.config import Config

        # botocore itself only reads AWS_DEFAULT_REGION; AWS_REGION is what many runtimes (Lambda, ECS) set.
        region = self.region_name or os.environ.get("AWS_REGION") or None
        # One attempt only: a send retried after a 5xx may reach the recipient twice (see the module doc).
        no_retry = Config(retries={"mode": "standard", "total_max_attempts": 1})
        self._client = boto3.client("sesv2", region_name=region, endpoint_url=self.endpoint_url, config=no_retry)
        self._client_pid = os.getpid()
        return self._client

    def provide(self) -> list[Tool]:
        toolkit = self
        opts = self.request_options("send_email")
        extra: dict[str, Any] = {}
        if "reply_to" in opts:
            extra["ReplyToAddresses"] = list(opts["reply_to"])
        if "tags" in opts:
            extra["EmailTags"] = [{"Name": k, "Value": v} for k, v in opts["tags"].items()]
        if "feedback_forwarding_address" in opts:
            extra["FeedbackForwardingEmailAddress"] = opts["feedback_forwarding_address"]

        @tool("send_email")
        def send_email(
            to: Annotated[list[str], Field(min_length=1)],
            subject: str,
            body: str,
            cc: list[str] | None = None,
            bcc: list[str] | None = None,
            html: str | None = None,
        ) -> ToolOutput:
            """Send an email through Amazon SES.

            Args:
                to: recipient addresses, e.g. ["ana@example.com"]
                subject: the subject line, one line of text
                body: the message as plain text
                cc: addresses to copy, visible to all recipients
                bcc: addresses to copy, hidden from the other recipients
                html: an HTML version of the message, shown by mail clients that support it
            """
            sender = toolkit.from_email or os.environ.get(FROM_ENV_VAR, "").strip() or None
            if sender is None:
                return ToolOutput.error(f"no sender address: pass from_email=... to SESTool or set {FROM_ENV_VAR}")
            problem = _check_message(to, cc or [], bcc or [], subject, body)
            if problem:
                return ToolOutput.error(problem)
            destination: dict[str, list[str]] = {"ToAddresses": list(to)}
            if cc:
                destination["CcAddresses"] = list(cc)
            if bcc:
                destination["BccAddresses"] = list(bcc)
            message_body: dict[str, Any] = {"Text": {"Data": body, "Charset": "UTF-8"}}
            if html:
                message_body["Html"] = {"Data": html, "Charset": "UTF-8"}
            request: dict[str, Any] = {
                **extra,
                "FromEmailAddress": sender,
                "Destination": destination,
                "Content": {"Simple": {"Subject": {"Data": subject, "Charset": "UTF-8"}, "Body": message_body}},
            }
            if toolkit.configuration_set:
                request["ConfigurationSetName"] = toolkit.configuration_set
            try:
                result = toolkit.client().send_email(**request)
            except ImportError:
                return ToolOutput.error("send_email needs boto3: pip install 'toolfork[ses]'")
            except Exception as exc:  # botocore's exception classes are only importable with the extra
                message = _describe_aws_error(exc)
                if message is None:
                    raise
                return ToolOutput.error(message)
            recipients = len(to) + len(cc or []) + len(bcc or [])
            return ToolOutput.from_value(
                {"status": "sent", "message_id": result.get("MessageId"), "recipients": recipients}
            )

        return [send_email]


SESToolkit = SESTool  # the name the other toolkits' pattern suggests; SESTool is the documented one


def _check_message(to: list[str], cc: list[str], bcc: list[str], subject: str, body: str) -> str | None:
    if not to:
        return "to must hold at least one recipient address"
    bad = [a for a in (*to, *cc, *bcc) if not _ADDRESS.fullmatch(a)]
    if bad:
        listed = ", ".join(map(repr, bad))
        return f"not a plain email address (use name@domain, without a display name): {listed}"
    total = len(to) + len(cc) + len(bcc)
    if total > MAX_RECIPIENTS:
        return f"{total} recipients; SES allows at most {MAX_RECIPIENTS} per message (To, Cc and Bcc together)"
    if not subject.strip():
        return "subject must not be empty"
    if "\r" in subject or "\n" in subject:
        return "subject must be a single line (no line breaks)"
    if not body.strip():
        return "body must not be empty"
    return None


def _describe_aws_error(exc: Exception) -> str | None:
    """A model-readable message for an expected boto failure, or None for a bug (re-raised)."""
    try:
        from botocore import exceptions as bx
    except ImportError:  # pragma: no cover - boto3 absent means client() already failed
        return None
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Unknown")
        text = error.get("Message", str(exc))
        hint = ""
        if code == "MessageRejected" and "verif" in text.lower():
            hint = " The sender (and, in the SES sandbox, every recipient) must be a verified identity."
        return _scrub(f"SES refused the email ({code}): {str(text).rstrip('.')}.{hint}")
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError)):
        return (
            "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), "
            "or pass a configured client to SESTool"
        )
    if isinstance(exc, bx.NoRegionError):
        return "no AWS region: set AWS_REGION or AWS_DEFAULT_REGION, or pass region_name=... to SESTool"
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return _scrub(f"could not reach Amazon SES: {exc}")
    if isinstance(exc, bx.ParamValidationError):
        return _scrub(f"SES rejected the request parameters: {exc}")
    if isinstance(exc, bx.BotoCoreError):
        return _scrub(f"Amazon SES call failed: {exc}")
    return None


def _scrub(message: str) -> str:
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if secret and len(secret) >= 4:
        message = message.replace(secret, "[redacted]")
    return message
