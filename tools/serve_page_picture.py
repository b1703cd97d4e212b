"""Draw docs/serve_page.png: the page crnn-serve shows at /, after the images of weights/samples/ were dropped on it.

    python tools/serve_page_picture.py [--out docs/serve_page.png]

Starts `crnn-serve --weights en --weights zh` on a free local port, opens the page in headless Chromium (the same
DevTools driver tests/test_serve.py uses), drops the English samples with model `en` and the Chinese line with model
`zh`, per-character confidences on, and saves a screenshot. Needs the `serve` extra and Debian's chromium.
"""
from __future__ import annotations

import argparse
import base64
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_serve import DevTools, drop_files  # noqa: E402


def free_port() -> int:
    """A local TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, seconds: float = 300) -> None:
    """Until /readyz answers 200 (models loaded and warmed up)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"crnn-serve on port {port} was not ready within {seconds:.0f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "docs" / "serve_page.png"))
    args = p.parse_args(argv)
    port = free_port()
    serve = Path(sys.executable).parent / "crnn-serve"
    srv = subprocess.Popen([str(serve), "--port", str(port), "--weights", "en", "--weights", "zh", "--threads", "1"],
                           cwd=REPO)
    try:
        wait_ready(port)
        samples = REPO / "weights" / "samples"
        english = [(f.name, f.read_bytes()) for f in sorted(samples.glob("synth_*.png"))[:5]]
        chinese = [(f.name, f.read_bytes()) for f in sorted(samples.glob("zh_*.png"))]
        with tempfile.TemporaryDirectory() as profile, DevTools(Path(profile)) as tools:
            tools.open(f"http://127.0.0.1:{port}/")
            for files, model in ((english, "en"), (chinese, "zh")):
                got = drop_files(tools, files, model, chars=True)
                if got["state"] != "done":
                    raise RuntimeError(f"the page did not read the {model} samples: {got}")
            tools.call("Emulation.setDeviceMetricsOverride", width=1000, height=770, deviceScaleFactor=1, mobile=False)
            shot = tools.call("Page.captureScreenshot", format="png")["data"]
        Path(args.out).write_bytes(base64.b64decode(shot))
        print(f"serve_page_picture: wrote {args.out}")
    finally:
        srv.terminate()
        srv.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
