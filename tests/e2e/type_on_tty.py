#!/usr/bin/env python3
# Runs a command on a pseudo-terminal and types one answer after each prompt that ends in
# ':', as a user would a passphrase. Prints what the terminal showed (the answers are not
# echoed unless the command left echo on) and exits with the command's status.
# usage: type_on_tty.py ANSWER[,ANSWER...] CMD ARGS...
import os, pty, select, sys

answers = sys.argv[1].split(",")
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
shown = b""
while True:
    ready, _, _ = select.select([fd], [], [], 30)
    if not ready:
        break
    try:
        data = os.read(fd, 4096)
    except OSError:  # EIO: the command closed the terminal
        break
    if not data:
        break
    shown += data
    if data.rstrip().endswith(b":") and answers:
        os.write(fd, (answers.pop(0) + "\n").encode())
_, status = os.waitpid(pid, 0)
sys.stdout.write(shown.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
