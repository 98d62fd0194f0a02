"""pty_drive.py - run a command on a pseudo-terminal and type answers when
its prompts appear; shared by the shell tests (common.sh's pty_run).

Usage: pty_drive.py LOG SCRIPT CMD [ARGS...]
  LOG     gets everything CMD writes to the terminal (raw, with \r)
  SCRIPT  lines "PROMPT-SUBSTRING<TAB>ANSWER": when PROMPT-SUBSTRING has
          appeared (after the previous step's prompt), ANSWER and a newline
          are typed; the answer "EOF" types ^D (end of input) instead.
Exit status: CMD's, or 1 when it died of a signal or wrote nothing for 30 s
(then "[timeout]" ends LOG and CMD is killed: a liveness bound, the test
waits on the prompts themselves).
"""
import os
import pty
import select
import sys

log = open(sys.argv[1], "wb")
with open(sys.argv[2]) as f:
    script = [line.rstrip("\n").split("\t", 1) for line in f]
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[3], sys.argv[3:])
buf = b""
step = 0
while True:
    r, _, _ = select.select([fd], [], [], 30)
    if not r:
        log.write(b"\n[timeout]\n")
        os.kill(pid, 9)
        break
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    log.write(data)
    log.flush()
    buf += data
    while step < len(script) and script[step][0].encode() in buf:
        prompt = script[step][0].encode()
        buf = buf[buf.index(prompt) + len(prompt):]
        ans = script[step][1]
        os.write(fd, b"\x04" if ans == "EOF" else (ans + "\n").encode())
        step += 1
_, st = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 1)
