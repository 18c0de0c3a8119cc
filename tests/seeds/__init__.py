"""The seed experiments (tests/fixtures/seeds: the two documents karpui was built from, their manifests and the README
listing what each must show), run as the project's own acceptance tests: through `karp` (test_karp.py) and through
the documents' own kubectl lines, verbatim, against the lab's Kubernetes API (test_kubectl.py). A seed test never
changes to fit the code."""

from pathlib import Path

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
SETUP = Path(__file__).resolve().parent / "setup"
