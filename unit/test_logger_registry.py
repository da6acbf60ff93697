"""pytest's log capture walks logging's registry of loggers at every test phase; loggers made in
another thread meanwhile (the suite's background imports, the SDKs' lazy imports in the engine's
thread) must not make that walk raise (fixtures/logger_registry.py)."""

from __future__ import annotations

import logging
import threading

from _pytest.logging import LogCaptureHandler, catching_logs

from fixtures.logger_registry import SnapshotDict, guard_logger_registry


def walk_while_loggers_are_made(manager: logging.Manager, made: int) -> tuple[int, list]:
    """Enter and leave pytest's log capture on a root logger of `manager` for as long as a
    thread makes `made` new loggers there without pause: the walks made and the errors they
    raised."""

    def make_loggers() -> None:
        for i in range(made):
            manager.getLogger(f"vlmbench-test.made.{i}")

    maker = threading.Thread(target=make_loggers, daemon=True)
    errors: list[BaseException] = []
    walks = 0
    saved = logging.root.manager
    logging.root.manager = manager  # catching_logs walks logging.getLogger().manager
    try:
        maker.start()
        while maker.is_alive():
            walks += 1
            try:
                with catching_logs(LogCaptureHandler(), level=logging.INFO):
                    pass
            except RuntimeError as exc:
                errors.append(exc)
    finally:
        maker.join()
        logging.root.manager = saved
    return walks, errors


def fresh_manager() -> logging.Manager:
    """A logging manager of its own (the process's registry stays as it is), with one
    non-propagating logger so the walk has work to do."""
    manager = logging.Manager(logging.root)
    manager.getLogger("vlmbench-test.quiet").propagate = False
    return manager


def test_the_guarded_registry_survives_loggers_made_during_the_walk() -> None:
    manager = fresh_manager()
    guard_logger_registry(manager)
    assert isinstance(manager.loggerDict, SnapshotDict)
    walks, errors = walk_while_loggers_are_made(manager, made=20_000)
    assert errors == [] and walks > 10  # the walks overlapped the making
    quiet = manager.loggerDict["vlmbench-test.quiet"]
    assert isinstance(quiet, logging.Logger) and not quiet.handlers  # detached again on exit


def test_guarding_keeps_every_logger_and_is_done_once() -> None:
    manager = fresh_manager()
    before = dict(manager.loggerDict)
    guard_logger_registry(manager)
    guarded = manager.loggerDict
    guard_logger_registry(manager)
    assert manager.loggerDict is guarded and dict(guarded) == before
    assert manager.getLogger("vlmbench-test.quiet") is before["vlmbench-test.quiet"]
    assert isinstance(guarded.values(), list) and list(guarded) == list(before)


def test_the_suite_guards_the_process_registry(pytester) -> None:
    """The plugin list installs the guard at configure."""
    pytester.makeconftest('pytest_plugins = ["fixtures.suite"]')
    pytester.makepyfile(
        "import logging\n"
        "from fixtures.logger_registry import SnapshotDict\n"
        "def test_guarded():\n"
        "    assert isinstance(logging.root.manager.loggerDict, SnapshotDict)\n"
    )
    assert pytester.runpytest_subprocess("-p", "no:randomly").ret == 0
