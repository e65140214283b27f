"""Run untrusted generated Python in a subprocess with time, memory and file-system limits.

`run_python(code, timeout_s=10, memory_mb=512) -> SandboxResult` never executes the code in this
process. The child is `python -I <prelude> <dir> <program>` in a fresh temporary directory
(removed afterwards), in its own session (the whole group is killed on timeout), with a minimal
environment (HOME and TMPDIR inside the directory). Before the program runs, the prelude:
  * sets rlimits: address space (memory_mb), CPU seconds (timeout + 1), file size (16 MiB),
    open files (64), no core dumps;
  * installs an audit hook (it cannot be removed afterwards) that refuses, with PermissionError:
    opening a file for writing, creating, removing, renaming or chmod-ing anything outside the
    directory; starting processes (subprocess, os.system, exec*, spawn*, fork); sockets
    (connect, bind); loading native code through ctypes.
Status: "passed" (exit 0), "failed" (non-zero exit, e.g. a failed assert or a PermissionError;
also a program that exits, e.g. exit() in its main block, before its end, where the tests are),
"timeout" (wall clock over timeout_s), "memory" (MemoryError or killed by the memory limit).

This is containment for sanity checks of model output (loops, memory blow-ups, stray writes),
not a security boundary against adversarial code: use a container or VM for that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PRELUDE = r'''
import os, resource, sys
box, program, mem, cpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu),
                 (resource.RLIMIT_FSIZE, 16 << 20), (resource.RLIMIT_NOFILE, 64),
                 (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(lim, (val, val))
os.chdir(box)
src = open(program).read()
_real, _box = os.path.realpath, os.path.realpath(box)
_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                "os.symlink", "os.link", "os.truncate", "os.utime", "shutil.rmtree",
                "shutil.move", "os.replace", "os.chdir"}
_DST_EVENTS = {"shutil.copyfile", "shutil.copytree", "shutil.copymode", "shutil.copystat"}
_DENY = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
         "os.forkpty", "os.kill", "os.killpg", "socket.connect", "socket.bind", "ctypes.dlopen",
         "ctypes.dlsym", "ctypes.call_function", "pty.spawn", "os.putenv", "os.unsetenv"}

def _inside(p):
    if isinstance(p, int):
        return True
    try:
        p = os.fsdecode(p)
    except TypeError:
        return False
    r = _real(p)
    return r == _box or r.startswith(_box + os.sep)

def _hook(event, args):
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, 0))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                  (isinstance(flags, int) and flags & _WRITE)
        if writing and not _inside(path):
            raise PermissionError(f"sandbox: writing outside the sandbox is refused: {path}")
    elif event in _PATH_EVENTS or event in _DST_EVENTS:
        for p in (args[1:2] if event in _DST_EVENTS else args[:2]):
            if isinstance(p, (str, bytes, os.PathLike)) and not _inside(p):
                raise PermissionError(f"sandbox: {event} outside the sandbox is refused: {p}")
    elif event in _DENY:
        raise PermissionError(f"sandbox: {event} is refused")

sys.addaudithook(_hook)
del resource
sys.argv = [program]
try:
    exec(compile(src, program, "exec"), {"__name__": "__main__", "__file__": program})
except SystemExit as e:
    sys.stderr.write(f"sandbox: the program exited ({e.code!r}) before its end\n")
    sys.stderr.flush()
    os._exit(3)
'''


@dataclass(frozen=True)
class SandboxResult:
    status: str  # passed | failed | timeout | memory
    returncode: int | None
    stdout: str
    stderr: str  # the tail

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _tail(b: bytes | None, n: int = 2000) -> str:
    return (b or b"").decode("utf-8", "replace")[-n:]


def _read_tail(path: Path, n: int = 8192) -> bytes:
    """The last n bytes of a file the child wrote (its output goes to files, where the file-size
    limit holds, not to pipes this process would have to drain into memory)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - n))
        return f.read()


def run_python(code: str, timeout_s: float = 10.0, memory_mb: int = 512) -> SandboxResult:
    box = Path(tempfile.mkdtemp(prefix="specpilot-sandbox-"))
    logs = Path(tempfile.mkdtemp(prefix="specpilot-sandbox-out-"))   # outside the box: untouchable
    try:
        prelude = box / ".prelude.py"
        prelude.write_text(PRELUDE)
        program = box / "program.py"
        program.write_text(code)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(box), "TMPDIR": str(box),
               "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        argv = [sys.executable, "-I", str(prelude), str(box), str(program),
                str(memory_mb << 20), str(int(timeout_s) + 1)]
        with open(logs / "stdout", "wb") as fo, open(logs / "stderr", "wb") as fe:
            proc = subprocess.Popen(argv, cwd=box, env=env, stdin=subprocess.DEVNULL,
                                    stdout=fo, stderr=fe, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        out, err = _read_tail(logs / "stdout"), _read_tail(logs / "stderr")
        if timed_out:
            return SandboxResult("timeout", None, _tail(out), _tail(err))
        rc = proc.returncode
        if rc == 0:
            status = "passed"
        elif b"MemoryError" in (err or b"") or rc in (-signal.SIGKILL, -signal.SIGSEGV):
            status = "memory"
        elif rc == -signal.SIGXCPU:
            status = "timeout"
        else:
            status = "failed"
        return SandboxResult(status, rc, _tail(out), _tail(err))
    finally:
        shutil.rmtree(box, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
