"""pytest-html integration: per-case picture and raw answer, and the metrics in the summary.

Per case (on whichever process ran the test): the evaluation's rendering of the case with the
prediction drawn on it, and the raw response. On the controller: each evaluation's headline table
with intervals and its plots, in the report's summary section.
"""

from __future__ import annotations

import base64
import html
import json

import pytest

from fixtures.datasets import evaluation
from fixtures.outcomes import OUTCOME_KEY
from support.evaluation import evaluation_class
from support.outputs import with_intervals


def _html_enabled(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "htmlpath", None))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if call.when != "call" or not _html_enabled(item.config) or OUTCOME_KEY not in item.stash:
        return
    from pytest_html import extras

    report = outcome.get_result()
    result = item.stash[OUTCOME_KEY]
    case = item.callspec.params["case"]
    added = []
    picture = evaluation(item.config, case.evaluation).render(case, result)
    if picture is not None:
        added.append(
            extras.image(base64.b64encode(picture).decode("ascii"), "case", "image/jpeg", "jpg")
        )
    rows = [
        ("status", result.status),
        ("prediction", json.dumps(result.prediction)),
        ("target", json.dumps(result.target)),
        ("raw response", result.raw or "(no response)"),
    ]
    if result.error:
        rows.append(("error", result.error))
    cells = "".join(
        f"<tr><th>{html.escape(k)}</th><td><pre>{html.escape(v)}</pre></td></tr>" for k, v in rows
    )
    added.append(extras.html(f'<table class="vlmbench-case">{cells}</table>'))
    report.extras = [*getattr(report, "extras", []), *added]


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_summary(prefix: list, summary: list, postfix: list, session) -> None:
    from reports.plugin import REPORT_PLUGIN_KEY

    plugin = session.config.stash.get(REPORT_PLUGIN_KEY, None)
    if plugin is None:
        return
    for name, table in plugin.summaries.items():
        headline = evaluation_class(name).headline(table)
        metrics = [c for c in headline.columns if f"{c}_lo" in headline.columns]
        postfix.append(f"<h2>vlmbench: {html.escape(name)} (95% bootstrap intervals)</h2>")
        postfix.append(
            "<style>table.vlmbench td, table.vlmbench th {padding: 2px 10px; "
            "text-align: right; white-space: nowrap}</style>"
        )
        table = with_intervals(headline, metrics)
        postfix.append(table.to_html(index=False, border=0, classes="vlmbench"))
        for path in plugin.files.get(name, []):
            if path.suffix == ".png":
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                postfix.append(
                    f'<p><img alt="{html.escape(path.name)}" style="max-width:100%" '
                    f'src="data:image/png;base64,{data}"></p>'
                )
