"""An upstream process that hangs before its handshake: it never reads stdin, so `initialize` gets no answer."""

from __future__ import annotations

import time

if __name__ == "__main__":
    while True:
        time.sleep(3600)
