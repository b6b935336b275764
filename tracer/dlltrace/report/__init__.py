"""Explaining loads: explain.py (found elsewhere, fixes), verdict.py (the failure the program hit),
render.py (one call as text or JSON), analysis.py (a trace's incidents), the three formats (text.py,
markdown.py, json.py), redact.py, and summary.py (what `dlltrace run` and `dlltrace report` print)."""
