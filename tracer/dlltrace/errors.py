"""The one exception type a user may see, as one line and an exit code."""

# Exit codes (README.md, "Exit codes"; every one tested in tests/test_exit_codes.py). `dlltrace run`
# exits with the program's own code when the program exited or crashed (on Unix its low 8 bits; the
# summary names the full code); the codes below are dlltrace's own: its errors (2-7) come before the
# program starts, with one `dlltrace: ` line on stderr and no summary; 8, 130, 137, 128+N say how a
# program that did not simply exit ended, in the summary too.
EXIT_OK = 0
EXIT_SIMULATED_FAILURE = 1  # `simulate`: a simulated load failed
EXIT_PROBLEMS = 1       # `deps`: a load would fail; `check`: the package needs what it lacks (docs/static.md)
EXIT_USAGE = 2          # bad command line, invalid scenario, missing input file
EXIT_BAD_TRACE = 3      # a trace that is not readable as a dlltrace trace
EXIT_NO_COMMAND = 4     # `run` with no command, or a command that does not exist
EXIT_OUTPUT = 5         # the trace (or another output) cannot be written
EXIT_NO_WINE = 6        # `--wine` without wine64 installed
EXIT_UNSUPPORTED = 7    # a feature this platform cannot do
EXIT_NOT_RUN = 8        # `run`: the program never ran (Wine failed to start, or not a Windows program)
EXIT_INTERNAL = 9       # dlltrace's own failure: a bug, or an install that lacks one of its dependencies
EXIT_NOT_TRACED = 10    # `run`: the program ran, but untraced: the shim was not loaded into the process it started
                        # (a 32-bit program without the 32-bit shim, an arm64 / ARM64EC one: unsupported); never success
EXIT_INTERRUPTED = 130  # `run`: Ctrl-C (passed to the program; the trace is finished)
EXIT_KILLED = 137       # `run`: the program was killed (it ended without exiting)
# `run`: 128 + N when dlltrace run itself got signal N (SIGTERM 143, SIGHUP 129), or its launcher was killed by it


class DlltraceError(Exception):
    """An error with a one-line message for the user and the exit code to leave with."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
