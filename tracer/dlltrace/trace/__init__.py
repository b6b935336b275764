"""Trace files: reading (reader.py; capped.py: what the size cap dropped), writing (files.py: the
header, the spill and its compression; redact.py: a redacted copy) and recording: launch.py runs a
program under the native shim (Windows, or Wine), shim.py is the shim's Python side, linux.py runs a
program with the LD_AUDIT recorder. What needs the loader model (the replay, the facts `run` appends)
is above: diagnosis/ and runner.py."""
