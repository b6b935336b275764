"""Emulations: what a program's own code does around the loader, as functions that drive a loader
model. python.py: CPython's extension imports, ctypes.CDLL, os.add_dll_directory and torch's
_load_dll_libraries over the Windows loader (loader/windows/engine.py)."""
