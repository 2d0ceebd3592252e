"""Each experiment page as a user goes through it on the CPU (picked in the sidebar): pick settings (sidebar and page), run a
small experiment, watch its progress, see the chart, download PNG/HTML/CSV; then reload and find the
run in the history of the compare page."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("streamlit")

from pages.common.catalog import available
from tests.e2e.test_screenshots import WINDOW, readable, shoot

EXISTING = {path for path, _, _ in available()}


def needs(page_file: str):
    return pytest.mark.skipif(page_file not in EXISTING, reason=f"{page_file} does not exist yet")


@needs("pages/number_formats.py")
def test_number_formats(lab, check_exports):
    lab.start("tiny", "fp16", "Number formats")
    lab.expect(lab.charts().first).to_be_visible(timeout=180_000)  # the inspector runs on its own
    lab.tab("Accumulation")
    lab.number("Steps", 200)
    lab.run()
    lab.expect(lab.charts().first).to_be_visible()
    files = check_exports()
    assert b"fp16" in files["csv"]
    lab.no_exception()


@needs("pages/matmul.py")
def test_matmul(lab, check_exports):
    """Also the answer after a run, as test_screenshots checks it after an example: in a 1280×800 window."""
    lab.page.set_viewport_size(WINDOW)
    lab.start("tiny", "bf16", "Matmul throughput")
    lab.page.get_by_text("Custom M×N×K", exact=True).click()  # one shape (the default sweep takes minutes)
    lab.idle()
    lab.number("M", 128)
    run_id = lab.run()
    lab.expect(lab.charts().first.locator(".main-svg").first).to_be_visible()  # drawn, not only placed
    lab.expect(lab.main().get_by_text(re.compile(rf"^Run {run_id} · ")).filter(visible=True).first).to_be_in_viewport()
    shoot(lab, "matmul-after-a-run")
    readable(lab, "pages/matmul.py")
    files = check_exports({"dtype"})
    assert b"bf16" in files["csv"] and b"fp32" in files["csv"]
    lab.expect(lab.main().get_by_text(re.compile("tf32.*unsupported|not measured", re.I)).first).to_be_attached()
    lab.no_exception()


@needs("pages/allocator.py")
def test_allocator(lab, check_exports):
    lab.start("small", "fp32", "Allocator")
    lab.expect(lab.main().get_by_text("CPU selected", exact=False).first).to_be_visible()
    lab.number("Tensor size (MiB)", 64)
    lab.run()
    lab.expect(lab.charts().first).to_be_visible()
    check_exports({"step"})
    lab.no_exception()


@needs("pages/train_memory.py")
def test_training_memory(lab, check_exports):
    lab.start("mini", "bf16", "Training memory")
    assert lab.value("Precision") == "bf16-autocast"  # the page starts from the sidebar's dtype
    lab.expect(lab.main().get_by_text("mini: 3,609,728 parameters")).to_be_visible()  # and uses its model size
    lab.choose("Model size", "tiny", sidebar=True)  # changed on the page: the page follows
    lab.expect(lab.main().get_by_text("tiny: 1,411,392 parameters")).to_be_visible()
    lab.number("Batch", 2)
    lab.number("Context (tokens)", 32)
    planner_charts = lab.charts().count()
    lab.run("Run and record")
    lab.expect(lab.charts()).not_to_have_count(planner_charts)
    check_exports()
    lab.no_exception()


@needs("pages/step_bench.py")
def test_step_benchmark(lab, check_exports):
    lab.start("tiny", "bf16", "Step benchmark")
    assert lab.value("Precision").startswith("bf16-autocast — ")  # the mode, then what it is
    lab.number("Batch", 2)
    lab.number("Context (tokens)", 32)
    lab.number("Warm-up steps (at least)", 1)
    lab.number("Warm-up steps (at most)", 2)
    lab.number("Timed steps", 3)
    lab.number("Profiled steps", 0)
    lab.run("Run step benchmark")  # the course and today's stack, side by side
    lab.expect(lab.charts().first).to_be_visible()
    check_exports()
    lab.no_exception()


@needs("pages/interconnect.py")
def test_interconnect(lab, check_exports):
    lab.start("tiny", "fp32", "Interconnect")
    main = lab.main()
    lab.expect(main.get_by_text(re.compile("collectives run between CPU processes with Gloo")).first).to_be_visible()
    main.get_by_text("Many boxes: the torchrun command").click()
    # the page's "How measured" text quotes a torchrun line too, in its closed expander: the command shown
    # must be the one the click opened
    lab.expect(main.get_by_text(re.compile("torchrun --nnodes 2")).filter(visible=True).first).to_be_visible()
    lab.run()
    lab.expect(lab.charts().first).to_be_visible()
    files = check_exports({"collective", "bytes", "median_ms", "algbw_gbs", "busbw_gbs"})
    assert b"all_reduce" in files["csv"] and b"all_to_all" in files["csv"]
    lab.expect(main.get_by_text(re.compile("peer matrix needs at least 2 CUDA GPUs")).first).to_be_attached()
    lab.no_exception()


@needs("pages/compare.py")
@needs("pages/number_formats.py")
def test_reload_and_find_the_run_in_history(lab):
    lab.open("number_formats")
    lab.expect(lab.charts().first).to_be_visible(timeout=180_000)
    (run_id,) = lab.banners()
    lab.page.reload()
    lab.idle()
    lab.nav("Compare & export")
    lab.idle()
    picker = lab.main().get_by_test_id("stMultiSelect").filter(has_text="Selected runs")
    chip = picker.get_by_text(re.compile(rf"^{run_id} · formats"))
    option = lab.page.get_by_role("option", name=re.compile(rf"^{run_id} · formats"))
    for _ in range(3):  # a redraw of the page as the option is clicked can drop the click (CI, once): pick again
        picker.click()
        # typed, as a user finds one run among many: the list draws only the options that fit it
        lab.page.keyboard.type(run_id)
        try:
            lab.expect(option).to_have_count(1, timeout=30_000)
        except AssertionError:  # the click that opened the list was dropped by a redraw: open it again
            lab.page.keyboard.press("Escape")
            continue
        option.click()
        lab.page.keyboard.press("Escape")
        lab.idle()
        if chip.count():
            break
    lab.expect(chip).to_be_visible()
    lab.expect(lab.main().get_by_text(re.compile(rf"^Run {run_id} · CPU"))).to_be_visible()
    lab.expect(lab.charts().first).to_be_visible()
    name, data = lab.download("Export runs file")
    exported = json.loads(data)
    assert exported["format"] == "gpulab-runs" and [r["id"][:8] for r in exported["runs"]] == [run_id]
    lab.no_exception()
