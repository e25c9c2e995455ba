"""The container image (Dockerfile, .dockerignore; docs/deploy.md).

Without Docker: the build context .dockerignore leaves (what the Dockerfile copies) builds the package
with its data files, and HEALTHCHECK asks a route the app has. With a working Docker (the client on
PATH and its daemon answering): the image builds, runs as a non-root user and serves a model mounted
at /model (/live, /ready, /predict, /metrics); skipped otherwise, saying which is missing."""
from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from conftest import _free_port

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "superbloom-test:latest"


def context_files() -> list[str]:
    """The repository's tracked files that .dockerignore lets into the build context (its rules as this
    file uses them: root-relative patterns and folders, `**/NAME` at any depth, `!` to let back in)."""
    rules = [r.strip() for r in (ROOT / ".dockerignore").read_text().splitlines() if r.strip() and r[0] != "#"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    kept = []
    for f in tracked:
        keep = True
        for rule in rules:
            allow, pattern = rule.startswith("!"), rule.lstrip("!").rstrip("/")
            if pattern.startswith("**/"):  # at any depth: a path component
                hit = any(fnmatch.fnmatch(part, pattern[3:]) for part in Path(f).parts)
            else:  # from the context's root: the path itself or a folder above it
                hit = fnmatch.fnmatch(f, pattern) or f.startswith(pattern + "/")
            if hit:
                keep = allow
        if keep:
            kept.append(f)
    return kept


def test_the_build_context_builds_the_package_with_its_data(tmp_path):
    files = context_files()
    copied = set(re.findall(r"^COPY (.+) \S+$", (ROOT / "Dockerfile").read_text(), re.M))
    named = {w for line in copied for w in line.split()}
    assert named == {"pyproject.toml", "README.md", "LICENSE", "NOTICE", "superbloom"}
    assert all(any(f == n or f.startswith(n + "/") for f in files) for n in named), "a COPY source is ignored"
    assert not [f for f in files if f.startswith(("tests/", "benchmarks/", "docs/", ".git"))]
    src = tmp_path / "src"
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    names = zipfile.ZipFile(next((tmp_path / "wheel").glob("superbloom-*.whl"))).namelist()
    for needed in ("superbloom/static/index.html", "superbloom/data/wikispeedia_links.tsv.gz",
                   "superbloom/serving/telemetry.py", "superbloom/_log.py"):
        assert needed in names, needed


def test_the_healthcheck_asks_a_route_of_the_app(tiny_predictor):
    from superbloom.serving.app import create_app

    text = (ROOT / "Dockerfile").read_text()
    path = re.search(r"HEALTHCHECK .*?http://127\.0\.0\.1:8000(/\w+)", text, re.S).group(1)
    assert path == "/live" and path in {getattr(r, "path", None) for r in create_app(tiny_predictor).routes}
    assert re.search(r'^CMD \["/model", "--host", "0\.0\.0\.0", "--port", "8000"\]$', text, re.M)
    assert re.search(r"^USER (?!root)\w+$", text, re.M)


def docker_or_skip():
    if shutil.which("docker") is None:
        pytest.skip("docker is not on PATH")
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"docker is on PATH but its daemon does not answer: {(r.stderr or r.stdout).strip()[:200]}")


@pytest.mark.slow
def test_the_image_builds_and_serves_a_mounted_model(request):
    docker_or_skip()
    tiny_model = request.getfixturevalue("tiny_model")  # trained only where Docker works
    r = subprocess.run(["docker", "build", "-t", IMAGE, str(ROOT)], capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    uid = subprocess.run(["docker", "run", "--rm", "--entrypoint", "id", IMAGE, "-u"], capture_output=True, text=True)
    assert uid.returncode == 0 and uid.stdout.strip() != "0"
    port = _free_port()
    name = f"superbloom-test-{port}"
    run = subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "-p", f"127.0.0.1:{port}:8000",
                          "-v", f"{tiny_model.resolve()}:/model:ro", IMAGE], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
            pytest.fail(f"the container never answered /ready: {logs.stdout[-2000:]}{logs.stderr[-2000:]}")
        assert httpx.get(url + "/live").status_code == 200
        r = httpx.post(url + "/v1/predict", json={"context": ["Jazz"], "k": 3})
        assert r.status_code == 200 and len(r.json()["predictions"]) == 3
        assert 'route="/v1/predict",status="200"} 1.0' in httpx.get(url + "/metrics").text
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
        assert '"route": "/v1/predict"' in logs.stderr  # the JSON access log on stderr
    finally:
        subprocess.run(["docker", "stop", name], capture_output=True)
