"""The Windows loader model: rules.py (one named function per rule of the loader) and engine.py
(the Simulator that applies them to a world and a process state)."""
