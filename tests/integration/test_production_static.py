"""Issue 11, item 12: production settings must serve pages, so `collectstatic` has to succeed under them and every
asset a page links must get its hashed copy (the whole crawl through gunicorn is `.ci/production_smoke.py`)."""

import json
import os
import subprocess
import sys

from tests.karp import ROOT


def production(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="karpui.settings_production",
        SECRET_KEY="test-only-" + "x7Q-p9!" * 8,
        ALLOWED_HOSTS="karpui.example.com",
        KARPUI_VAR_DIR=str(tmp_path),
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


def test_collectstatic_succeeds_under_production_settings_and_hashes_every_vendored_file(tmp_path):
    result = production(tmp_path, "collectstatic", "--noinput")

    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "staticfiles" / "staticfiles.json").read_text())["paths"]
    for name in ("vendor/chartjs/chart.umd.min.js", "karpui/karpui.css", "karpui/savings.js"):
        assert manifest[name].startswith(name.rsplit(".", 1)[0] + "."), manifest.get(name)


def test_no_vendored_file_names_a_source_map_that_is_not_there():
    vendor = ROOT / "static" / "vendor"
    for path in vendor.rglob("*.js"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("//# sourceMappingURL="):
                assert (path.parent / line.partition("=")[2]).exists(), f"{path}: {line}"
