"""Traces: recording (launch.py runs a program under the native shim, shim.py is the shim's Python
side), reading (reader.py), replaying a trace through the loader model (replay.py) and the facts
`dlltrace run` appends for a later replay (collect.py)."""
