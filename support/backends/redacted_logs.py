"""Log records without secrets: every record is redacted when it is made.

The SDKs (openai, anthropic, httpx, httpcore, google_genai) log request URLs, headers and errors
at DEBUG; pytest's log capture, `--log-file`, live logs and the HTML report all read the records
through handlers. A filter on a logger sees only records made by that very logger (not its
children's), and handlers come and go with pytest's phases, so the redaction sits in the process's
LogRecord factory instead: it reaches every record of every logger, whatever handler emits it.
The message is formatted once (`getMessage`) and redacted with `keys.redact`; so are the text of
an attached exception and the stack.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from support.secrets import redact

_installed = False


def redacted_record(record: logging.LogRecord) -> logging.LogRecord:
    """`record` with its message, exception text and stack redacted in place (when they held a
    secret; a record whose format fails is left to logging's own error report)."""
    try:
        message = record.getMessage()
    except Exception:
        return record
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        clean = redact(text)
        if clean != text:
            record.exc_text = clean  # logging.Formatter uses it instead of formatting again
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


def install_log_redaction() -> None:
    """Wrap the process's LogRecord factory so that every record is redacted (idempotent)."""
    global _installed
    if _installed:
        return
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redacted_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)
    _installed = True
