"""The one exception type a user may see, as one line and an exit code."""

# Exit codes of the dlltrace command itself (a traced child's own code is passed through).
EXIT_USAGE = 2          # bad command line, invalid scenario, missing input file
EXIT_BAD_TRACE = 3      # a trace that is not readable as a dlltrace trace
EXIT_NO_COMMAND = 4     # `run` with no command, or a command that does not exist
EXIT_OUTPUT = 5         # the trace (or another output) cannot be written
EXIT_NO_WINE = 6        # `--wine` without wine64 installed
EXIT_UNSUPPORTED = 7    # a feature this platform cannot do


class DlltraceError(Exception):
    """An error with a one-line message for the user and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
