import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tracer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Lines a test wants shown at the end of the run, also with plain `pytest -q` (counts of generated
# cases run against Wine, ...).
SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter):
    for line in SUMMARY:
        terminalreporter.write_line(line)
