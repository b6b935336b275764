"""Worlds: where the loader model gets its facts (files, PE imports and exports, folders, KnownDLLs,
API sets). world.py: the interface, the process and system state, the virtual world of scenarios;
recorded.py: a trace's recorded facts; live.py: the real disk (or a Wine prefix)."""
