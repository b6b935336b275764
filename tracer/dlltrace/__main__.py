try:
    from dlltrace.cli import entry
except KeyboardInterrupt:  # (Ctrl-C while Python imports the CLI: one line, as cli.entry says it after)
    import sys

    print("dlltrace: interrupted", file=sys.stderr)
    raise SystemExit(130)

raise SystemExit(entry())
