from dlltrace.cli import entry

raise SystemExit(entry())
