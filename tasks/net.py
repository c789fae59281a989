"""Network probing shared by everything that downloads data (tfds's IMDB and CIFAR-10, LRA's
archive): a server that does not answer is reported at once instead of retried for minutes."""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request

__all__ = ["PROBE_TIMEOUT_S", "reachable"]

PROBE_TIMEOUT_S = 3.0


def reachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``url``'s server answers an HTTP HEAD request (any status) within ``timeout`` seconds,
    name lookup, proxies (``*_proxy`` variables) and redirects included."""
    outcome: list[bool] = []

    def probe() -> None:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "lra-probe"})
        try:
            with urllib.request.urlopen(request, timeout=timeout):
                outcome.append(True)
        except urllib.error.HTTPError:
            outcome.append(True)  # the server answered
        except (OSError, ValueError, http.client.HTTPException):
            outcome.append(False)

    # A daemon thread bounds the whole probe (the socket timeout does not cover name lookup).
    thread = threading.Thread(target=probe, daemon=True, name="lra-network-probe")
    thread.start()
    thread.join(timeout)
    return bool(outcome and outcome[0])
