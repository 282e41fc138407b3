"""The window's remote-server dialog: a sweep against the test server, plotted as latency vs concurrency."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.gui.plots.concurrency import latency_curves
from app.gui.remote_dialog import TABLE_COLUMNS, RemoteDialog
from app.results.row_types import ResultRow
from app.results.store import ResultStore
from tests.remote.fake_server import fake_server


def test_the_tables_columns_are_fields_of_a_row() -> None:
    """The dialog reads each column as a typed row's attribute: every one must be a field of the table."""
    assert [key for _h, key, _f in TABLE_COLUMNS if key not in ResultRow.TABLE] == []


def test_latency_curves_follow_concurrency_per_shape() -> None:
    rows = [
        ResultRow(status="ok", backends="remote", n_prompt=8, n_gen=4, n_parallel=c, ttft_p50_ms=10.0 * c,
                  ttft_p99_ms=20.0 * c, tpot_p50_ms=5.0, tpot_p99_ms=None)
        for c in (4, 1, 2)
    ]
    rows.append(ResultRow(status="failed", backends="remote", n_prompt=8, n_gen=4, n_parallel=8))
    rows.append(ResultRow(status="ok", backends="CPU", n_parallel=1, ttft_p50_ms=1.0))  # a local row: not here
    curves = latency_curves(rows)
    assert curves["TTFT p50"] == ([1.0, 2.0, 4.0], [10.0, 20.0, 40.0])
    assert curves["TTFT p99"][1] == [20.0, 40.0, 80.0] and curves["TPOT p50"][1] == [5.0] * 3
    assert "TPOT p99" not in curves  # no values: no curve
    rows.append(ResultRow(status="ok", backends="remote", n_prompt=64, n_gen=4, n_parallel=1, ttft_p50_ms=99.0))
    assert set(latency_curves(rows)) >= {"TTFT p50 (p8 n4)", "TTFT p50 (p64 n4)"}
    rows.append(ResultRow(status="ok", backends="remote", n_prompt=8, n_gen=4, n_depth=512, prefix_cache=1,
                          n_parallel=1, ttft_p50_ms=7.0))
    assert latency_curves(rows)["TTFT p50 (p8 n4 d512 cached)"] == ([1.0], [7.0])


def _fill(dlg: RemoteDialog, url: str, model: str, concurrency: str, requests: int) -> None:
    """A short sweep's fields: 8-token prompts, 4 generated."""
    for name, text in (("url", url), ("model", model), ("n_prompt", "8"), ("n_gen", "4"),
                       ("concurrency", concurrency)):
        dlg.fields[name].setText(text)
    dlg.requests.setValue(requests)


def test_the_dialog_sends_depths_and_the_prefix_cache_choice(qtbot) -> None:  # type: ignore[no-untyped-def]
    dlg = RemoteDialog()
    qtbot.addWidget(dlg)
    dlg.fields["model"].setText("m")
    dlg.fields["n_depth"].setText("0,1024")
    dlg.prefix_cache.setChecked(True)
    spec = dlg.spec()
    assert spec.n_depth == [0, 1024] and [t.prefix_cache for t in spec.tests()][-2:] == [True] * 2
    dlg.fields["n_depth"].setText("0")
    assert dlg.run() is not None and "--prefix-cache needs a context" in dlg.status.text()


def test_the_dialog_runs_a_remote_sweep_and_plots_it(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "r.sqlite3"
    dlg = RemoteDialog(store_path=store)
    qtbot.addWidget(dlg)
    with fake_server() as server:
        dlg.fields["url"].setText(server.url("twomodels"))
        assert dlg.run() == "asking the server for its model"  # no model name: the server is asked first
        qtbot.waitUntil(lambda: dlg.list_button.isEnabled(), timeout=10_000)
        assert "serves 2 models: choose one" in dlg.status.text() and not dlg.bridge.running
        assert [dlg.model_combo.itemText(i) for i in range(dlg.model_combo.count())] == ["a", "b"]
        _fill(dlg, server.url("usage"), "", "1,2", 2)
        dlg.run()  # the one model the server lists is used, then the sweep starts
        qtbot.waitUntil(lambda: dlg.fields["model"].text() == "fake" and dlg.bridge.running, timeout=10_000)
        qtbot.waitUntil(lambda: not dlg.bridge.running and not dlg.timer.isActive(), timeout=30_000)
    assert "finished: 2 ok, 0 failed" in dlg.status.text()
    assert dlg.plot.curves["TTFT p50"][0] == [1.0, 2.0]
    assert dlg.table.rowCount() == 2 and dlg.table.item(1, 0).text() == "2"  # a row per test: concurrency 2
    assert float(dlg.table.item(0, 8).text()) > 0  # requests per second
    with ResultStore(store) as s:
        rows = s.rows(s.runs()[0].run_id)
    assert [r.n_parallel for r in rows] == [1, 2] and all(r.backends == "remote" for r in rows)


@pytest.mark.parametrize("concurrency", ["0", "x"])
def test_bad_fields_are_one_line_and_start_nothing(qtbot, concurrency: str) -> None:  # type: ignore[no-untyped-def]
    dlg = RemoteDialog()
    qtbot.addWidget(dlg)
    dlg.fields["model"].setText("m")
    dlg.fields["concurrency"].setText(concurrency)
    assert dlg.run() is not None and not dlg.bridge.running
    assert "--concurrency" in dlg.status.text()


def test_a_failing_server_says_why_in_the_dialog(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dlg = RemoteDialog(store_path=tmp_path / "r.sqlite3")
    qtbot.addWidget(dlg)
    with fake_server() as server:
        _fill(dlg, server.url("http500"), "m", "1", 1)
        assert dlg.run() is None
        qtbot.waitUntil(lambda: not dlg.bridge.running and not dlg.timer.isActive(), timeout=30_000)
    text = dlg.status.text()
    assert "0 ok, 1 failed (the first: " in text and "500" in text  # the reason, not only the count
    assert "500" in dlg.table.item(0, 11).text()  # the "why" column


def test_one_line_reason_strips_a_servers_html() -> None:
    from app.gui.remote_dialog import one_line_reason

    html = "HTTP 501: <html><head><title>501</title></head><body><h1>Not Implemented</h1>\n</body></html>"
    assert one_line_reason(html) == "HTTP 501: 501 Not Implemented"
    assert len(one_line_reason("x" * 1000)) == 240


def test_log_axis_ticks_do_not_crowd() -> None:
    from app.gui.plots.concurrency import MAX_X_TICKS, concurrency_ticks, latency_ticks

    levels = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    ticks = concurrency_ticks(levels)
    assert len(ticks) <= MAX_X_TICKS and ticks[0] == (0.0, "1") and all(label.isdigit() for _, label in ticks)
    assert [label for _, label in concurrency_ticks([1, 2, 4])] == ["1", "2", "4"]
    wide = latency_ticks(3.0, 4000.0)  # three decades and more: decades only
    assert [label for _, label in wide] == ["10 ms", "100 ms", "1 s"]  # within 1.5x of the data
    narrow = [label for _, label in latency_ticks(12.0, 480.0)]
    assert narrow == ["10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms"]
    assert latency_ticks(0.0, 5.0) == []
