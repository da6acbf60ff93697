"""fixtures/interrupts.py: a Ctrl-C traceback with an entry pytest cannot print (no line number)."""

from __future__ import annotations

import sys
import types

import pytest

from fixtures.interrupts import pytest_keyboard_interrupt


def interrupt_without_a_line() -> pytest.ExceptionInfo[BaseException]:
    """A KeyboardInterrupt whose traceback's last entry has `tb_lineno` None, as CPython 3.11
    leaves one when the signal lands on an instruction without line information."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        frame = sys._getframe()
        exc.__traceback__.tb_next = types.TracebackType(None, frame, 10**6, -1)
        assert exc.__traceback__.tb_next.tb_lineno is None  # no line for that instruction
        return pytest.ExceptionInfo.from_exception(exc)


def test_pytest_alone_cannot_print_it():
    """The bug the hook works around (if pytest fixes it, this fails: drop the hook)."""
    with pytest.raises(TypeError):
        interrupt_without_a_line().getrepr(funcargs=True)


def test_the_hook_leaves_the_entry_out_and_the_rest_prints():
    excinfo = interrupt_without_a_line()
    pytest_keyboard_interrupt(excinfo)
    text = str(excinfo.getrepr(funcargs=True))
    assert "KeyboardInterrupt" in text and "interrupt_without_a_line" in text
    assert len(excinfo.traceback) == 1
