"""pytest-html integration on the controller: each evaluation's metrics and plots in the summary.

(The per-case picture and raw answer are added where the case ran, by fixtures.outcomes.)
"""

from __future__ import annotations

import base64
import html

import pytest

from reports.plugin import REPORT_PLUGIN_KEY, interval_label


@pytest.hookimpl(optionalhook=True)
def pytest_html_results_summary(prefix: list, summary: list, postfix: list, session) -> None:
    plugin = session.config.stash.get(REPORT_PLUGIN_KEY, None)
    if plugin is None:
        return
    from support.outputs import with_intervals  # pandas: imported at report time only

    for name, headline in plugin.headlines.items():
        metrics = [c for c in headline.columns if f"{c}_lo" in headline.columns]
        label = interval_label(plugin.run)
        postfix.append(f"<h2>vlmbench: {html.escape(name)} ({html.escape(label)})</h2>")
        postfix.append(
            "<style>table.vlmbench td, table.vlmbench th {padding: 2px 10px; "
            "text-align: right; white-space: nowrap}</style>"
        )
        table = with_intervals(headline, metrics)
        postfix.append(table.to_html(index=False, border=0, classes="vlmbench"))
        compared = plugin.comparisons.get(name)
        if compared is not None and len(compared):
            postfix.append("<h3>Paired comparisons (b vs a, Holm-adjusted p)</h3>")
            shown = with_intervals(compared, ["diff"])
            shown = shown.drop(columns=["evaluation", "diff_se"], errors="ignore")
            postfix.append(shown.to_html(index=False, border=0, classes="vlmbench"))
        for path in plugin.files.get(name, []):
            if path.suffix == ".png":
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                postfix.append(
                    f'<p><img alt="{html.escape(path.name)}" style="max-width:100%" '
                    f'src="data:image/png;base64,{data}"></p>'
                )
