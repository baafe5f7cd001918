"""Run a command on a pseudo-terminal COLS columns wide and report its progress lines.

Usage: python3 tools/pty_run.py COLS CMD [ARGS...]
Prints "exit N drawn D longest L": D progress lines drawn in place ("\\r" TEXT "\\x1b[K"), L the
longest of them in characters (it must stay below COLS so the line never wraps).
"""
import fcntl
import os
import pty
import re
import struct
import sys
import termios


def main():
    cols, cmd = int(sys.argv[1]), sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:  # the size is set before the command starts, so it reads this width
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
        os.execvp(cmd[0], cmd)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode("utf-8", "replace")
    drawn = [s for s in re.findall(r"\r([^\r\n\x1b]*)\x1b\[K", text) if s]
    longest = max((len(s) for s in drawn), default=0)
    print(f"exit {os.waitstatus_to_exitcode(status)} drawn {len(drawn)} longest {longest}")


if __name__ == "__main__":
    main()
