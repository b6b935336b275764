"""Loader models: how an operating system's loader finds and maps a library. `windows/` is the
Windows model (its rules, one named function each, and the engine that applies them); a second
model (Linux's ld.so) goes beside it, driven through the same worlds."""
