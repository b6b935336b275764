"""The `dlltrace` subcommands, one module each with configure_parser(parser) and execute(args) -> int;
the logic they call lives in the packages beside this one."""
