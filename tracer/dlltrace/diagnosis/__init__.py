"""Diagnosing loads, above the loader models: replay.py (a Windows trace through the loader, each failed
call explained as it is replayed) and replay_linux.py (a Linux trace through ld.so's model), collect.py
(the facts `dlltrace run` appends: what a replay against the disk asks), explain.py (found elsewhere,
fixes) and verify.py (fixes re-run through the model), verdict.py (the failure the program hit),
analysis.py (a trace's incidents), ending.py (how the program ended), static.py (`check`, `deps`:
no trace), cuda.py (the CUDA table), scenario.py (scenario files). Facts, no words: render/ words them."""
