"""CPU methods that end their own Ray actor's process, for the scale-out tests.

Imported by each actor through ``--plugin scaleout_plugins``. ``t-kill-actor:SHAPE`` kills its
process whenever it is prepared on SHAPE (the shape can never be measured); ``t-kill-once:PATH``
kills its process the first time it is prepared anywhere (PATH, created then, marks it done), so
the retry on another actor succeeds.
"""

import os
import signal

from harness.registry import register
from sandbox_plugins import _Cpu


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


class _KillOnShape(_Cpu):
    def __init__(self, shape_name):
        super().__init__("t-kill-actor")
        self.shape_name = shape_name

    def prepare(self, problem, ctx):
        if problem.shape.name == self.shape_name:
            _die()
        return super().prepare(problem, ctx)


class _KillOnce(_Cpu):
    def __init__(self, marker):
        super().__init__("t-kill-once")
        self.marker = marker

    def prepare(self, problem, ctx):
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return super().prepare(problem, ctx)
        _die()


register("t-kill-actor", lambda args: _KillOnShape(args or ""), help="scale-out test method")
register("t-kill-once", lambda args: _KillOnce(args or ""), help="scale-out test method")
