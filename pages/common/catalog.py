"""The dashboard's pages, in menu order: app.py builds the navigation from it, home links to it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# (file, title, icon); a page is listed once its file exists.
PAGES = (
    ("pages/home.py", "Home", ":material/home:"),
    ("pages/number_formats.py", "Number formats", ":material/pin:"),
    ("pages/matmul.py", "Matmul throughput", ":material/speed:"),
    ("pages/allocator.py", "Allocator", ":material/memory:"),
    ("pages/train_memory.py", "Training memory", ":material/stacked_bar_chart:"),
    ("pages/step_bench.py", "Step benchmark", ":material/timer:"),
    ("pages/interconnect.py", "Interconnect", ":material/lan:"),
    ("pages/compare.py", "Compare & export", ":material/compare_arrows:"),
)


def available() -> list[tuple[str, str, str]]:
    return [p for p in PAGES if (ROOT / p[0]).exists()]
