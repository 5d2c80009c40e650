"""A fork server for crash tests: kill a writer with SIGKILL at a chosen point of a write.

The fault-injection suites of the storage distributions (td-memmap's ``td.memmap``,
td-h5's ``to_h5``) share this harness. A long-lived child process (torch and the
storage library imported once) forks one *writer* per command; the writer prepares its
data, then runs the write under a ``sys.setprofile`` hook that counts Python and C
calls and kills the process with SIGKILL at call number ``kill_at`` (so a kill point
drawn uniformly over a whole write lands in every phase). The test can also kill the
writer from outside after a delay (anywhere, including inside a system call), or
limit the size of the files it writes (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so
that writes fail with ``OSError``: disk full).

POSIX only (``os.fork``, ``resource``).

Examples:
    >>> import os, tempfile
    >>> from tensordict.testing.crash import ForkServer
    >>> setup = '''
    ... def prepare(cmd):
    ...     return cmd["text"]
    ...
    ... def write(cmd, text):
    ...     with open(cmd["path"], "w") as f:
    ...         f.write(text)
    ... '''
    >>> tmp = tempfile.mkdtemp()
    >>> with ForkServer(setup, os.path.join(tmp, "stderr.log")) as server:
    ...     out = server.run({"path": os.path.join(tmp, "a.txt"), "text": "hello"})
    >>> out["signal"], out["report"]["ok"]
    (0, True)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import IO, Any

__all__ = ["ForkServer"]

# Runs in the server; ``{setup}`` is the caller's source (``prepare``, ``write`` and
# optionally ``after``). STATE and MARKS are globals the setup may read and write.
_PRELUDE = r'''
import json, os, resource, signal, sys

STATE = [0]
MARKS = {}


def _hook_for(limit):
    state = STATE

    def hook(frame, event, arg):
        state[0] += 1
        if limit is not None and state[0] >= limit:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook
'''

_LOOP = r'''

def _writer(cmd, out_fd):
    prepared = prepare(cmd)
    if cmd.get("fsize"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cmd["fsize"], cmd["fsize"]))
    report = {"ok": True}
    sys.setprofile(_hook_for(cmd.get("kill_at")))
    try:
        write(cmd, prepared)
    except BaseException as err:  # reported to the test
        sys.setprofile(None)
        report = {"ok": False, "type": type(err).__name__, "msg": str(err)}
    sys.setprofile(None)
    if "after" in globals():
        after(cmd)
    report["events"] = STATE[0]
    report.update(MARKS)
    os.write(out_fd, (json.dumps(report) + "\n").encode())
    os._exit(0)


for line in sys.stdin:
    cmd = json.loads(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _writer(cmd, w)
    os.close(w)
    print(json.dumps({"pid": pid}), flush=True)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    print(json.dumps({"signal": sig, "report": json.loads(data) if data else None}), flush=True)
'''


class ForkServer:
    """A long-lived child process that forks one writer per :meth:`run` command.

    Args:
        setup (str): Python source run once in the server before any fork. It defines
            ``prepare(cmd)`` (run in the writer before the hook: build the data; its
            result is passed on) and ``write(cmd, prepared)`` (the write under test,
            run under the call-counting hook), and may define ``after(cmd)`` (run once
            the hook is removed, e.g. to wait for background cleanup as a normal exit
            would) and store numbers in the global ``MARKS`` dict (``STATE[0]`` is the
            number of calls counted so far), which are added to the report.
        log (str or path): file that receives the stderr of the server and its
            writers (storage libraries print every failed flush).

    Commands are JSON-serializable dicts; besides the keys the setup reads, the
    server understands ``kill_at`` (SIGKILL the writer at that call count) and
    ``fsize`` (the writer's ``RLIMIT_FSIZE`` in bytes).
    """

    def __init__(self, setup: str, log: Any) -> None:
        self.log: IO[str] = open(log, "w")  # noqa: SIM115 - closed in close()
        source = _PRELUDE + textwrap.dedent(setup) + _LOOP
        self.proc = subprocess.Popen(
            [sys.executable, "-c", source],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
        )

    def run(self, cmd: dict, kill_after: float | None = None) -> dict:
        """Forks a writer for ``cmd`` and waits for it to end.

        Args:
            cmd (dict): the command (JSON-serializable).
            kill_after (float, optional): seconds after which the test process sends
                SIGKILL to the writer (if it is still running).

        Returns:
            ``{"signal": n, "report": r}``: ``n`` is the signal that ended the writer
            (``0`` for a normal exit); ``r`` is ``None`` when it was killed, else
            ``{"ok": True}`` or ``{"ok": False, "type": ..., "msg": ...}`` (the error
            ``write`` raised), with ``"events"`` (calls counted) and the ``MARKS``.

        Raises:
            AssertionError: the server process died.
        """
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        pid = json.loads(self.proc.stdout.readline())["pid"]
        if kill_after is not None:
            time.sleep(kill_after)
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        line = self.proc.stdout.readline()
        assert line, "the writer host died"
        return json.loads(line)

    def close(self) -> None:
        """Ends the server (after its current writer) and closes the log."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)
        self.log.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
