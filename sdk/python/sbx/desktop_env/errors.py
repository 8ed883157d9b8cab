"""Errors of the DesktopEnv: they name the setup step or the getter/metric that failed."""


class SetupError(Exception):
    """A setup (or postconfig) step failed: ``step`` is its type, the message says why."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__("setup step `%s`: %s" % (step, message))
        self.step = step
        self.message = message


class EvaluationError(Exception):
    """The evaluator names a getter or metric sbx does not have, or is malformed."""
