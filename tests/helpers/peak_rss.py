"""`python peak_rss.py CAP_BYTES REPORT COMMAND...`: run COMMAND with its address space capped
at CAP_BYTES, write its own peak resident memory (KiB, wait4's figure) to the file REPORT, and
exit as it did (128 + N for a signal). Forked from this small process rather than from the test
runner, whose resident size a forked child's peak would otherwise include (Linux keeps it
across exec)."""

from __future__ import annotations

import os
import resource
import sys


def main() -> None:
    cap, report, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        os.execvp(argv[0], argv)
    _pid, status, usage = os.wait4(pid, 0)
    with open(report, "w", encoding="utf-8") as f:
        f.write(str(usage.ru_maxrss))
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
