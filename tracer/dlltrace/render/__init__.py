"""Rendering: the words, tables and documents of what diagnosis/ found. explained.py (one explained call,
as text and rich blocks), calls.py (a call as JSON), text.py, markdown.py, json.py (the three formats of
a trace's report), summary.py (what `dlltrace run` and `dlltrace report` print), linux.py (a Linux
trace's report), cuda.py, static.py, scenario.py, attach.py (the trace as a bug report's attachment),
progress.py (the progress bar)."""
