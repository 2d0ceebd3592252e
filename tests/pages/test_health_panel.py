"""The Home page's health panel: runs the check in the background, shows the verdict and the one-page report."""

import time
from dataclasses import replace

from core.hardware.device import host_name
from core.health import check
from core.health.check import HealthConfig, HealthReport
from core.health.verdict import step_row


def test_the_health_button_runs_in_the_background_and_shows_the_verdict_table(cpu_app, monkeypatch):
    asked = []

    def fake_health(cfg, manager, store=None, on_progress=None, **kwargs):
        asked.append((cfg, manager))
        on_progress(1, 2, "copies and all_reduce")
        time.sleep(1.0)
        report = HealthReport(config=cfg, device={"kind": "cpu", "name": "Test CPU", "host": host_name()})
        report.rows = [
            step_row("doctor: seed: 65536 stored in fp16", "cpu", "pass", "", "inf", "inf"),
            step_row("all_reduce busbw", "node", "no reference", "no reference for CPU — Test CPU", 1.5),
            step_row(
                "matmul fp32 burst→sustained drop", "cpu", "no reference", "no reference for CPU — Test CPU", 28.2
            ),
        ]
        report.rows[1] = replace(report.rows[1], unit="GB/s")
        report.rows[2] = replace(report.rows[2], unit="%")
        report.wall_s = 1.0
        return report

    monkeypatch.setattr(check, "run_health", fake_health)
    at = cpu_app.run()
    assert any("health check has not run on this box yet" in i.value for i in at.info)
    at.button(key="home.health").click().run()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(f"Healthy on {host_name()}" in s.value for s in at.warning):
        time.sleep(0.3)
        at.run()
    assert not at.exception
    from pages.common import lab

    ((cfg, manager),) = asked
    assert cfg == HealthConfig(device="cpu", soak_s=60.0) and manager is lab.manager()
    table = next(d.value for d in at.dataframe if "verdict" in d.value.columns and "figure" in d.value.columns)
    assert list(table["verdict"]) == ["✅ pass", "➖ no reference", "➖ no reference"]
    assert list(table["measured"]) == ["inf", "1.5 GB/s", "28.2 %"]
    # the banner counts what it did not judge: no green "Healthy" above a drop nothing judged
    assert not at.success
    (banner,) = [w.value for w in at.warning if f"Healthy on {host_name()}" in w.value]
    assert "— 2 figures not judged: all_reduce busbw 1.5 GB/s (no reference for CPU — Test CPU); matmul fp32 " in banner
    assert "burst→sustained drop 28% (no reference for CPU — Test CPU)." in banner
    assert "Nothing judged is below expected (1 pass)" in banner
    labels = [b.label for b in at.get("download_button")]
    assert "Health report (one HTML page, for a ticket)" in labels


def test_home_judges_a_stored_check_again_as_the_box_it_came_from(cpu_app, store):
    """The H200's check from examples/, imported: picked from the history and judged again by today's rules, it
    reads healthy, power-limited, its published figure labelled with the card it was measured on."""
    from tests.core.health.test_rejudge import CARD, CHECK, EXAMPLE

    store.import_file(EXAMPLE)
    at = cpu_app.run()
    assert not at.exception
    # another box's check is never shown as this one's (it was, red, with the H200's figures on a CPU box)
    assert any(i.value.startswith("The health check has not run on this box yet. Checks from other") for i in at.info)
    assert not any("on vm" in w.value for w in (*at.error, *at.warning, *at.success))
    at.selectbox(key="home.health.judge.pick").set_value(CHECK).run()
    at.button(key="home.health.judge").click().run()
    assert not at.exception, [e.value for e in at.exception]
    said = [i.value for i in at.info]
    assert any(s.startswith("Judged again by today's rules: imported from another box: vm") for s in said), said
    assert any("Healthy on vm" in s.value and "Power-limited while measured" in s.value for s in at.success)
    tables = [d.value for d in at.dataframe if "per clock" in d.value.columns]
    (table,) = tables  # only the one judged again: none of this box's own

    burst = table[table["figure"] == "matmul bf16 burst"].iloc[0]
    assert burst["verdict"] == "✅ pass" and "power-limited" in burst["while measured"]
    assert "83.6% of the peak per clock" in burst["per clock"] and CARD in burst["why"]
