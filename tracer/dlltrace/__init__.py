"""dlltrace: find out exactly why a Windows DLL failed to load."""

__version__ = "0.1.0"
