"""The CI recipes of docs/ci run as written (issue 46): each release job's commands, in
order, in a copy of the example they are written for, with the database tune would
have committed; the tune jobs' autopass commands parse.  The install steps (apt-get,
pip) and the hosted actions (checkout, upload) are the CI service's, not run here."""

from __future__ import annotations

import shlex
import subprocess

import pytest
import yaml

from autopass_build.cli.main import build_parser
from autopass_build.core import bolt_commands as bolt
from tests.support import REPO, copy_example, env_with_autopass, shipped_database

RECIPES = REPO / "docs" / "ci"
STAGES = ("pgo", "bolt") if bolt.missing() == "" else ("pgo",)


def github_jobs() -> dict[str, list[str]]:
    jobs = yaml.safe_load((RECIPES / "github-actions.yml").read_text())["jobs"]
    return {name: [step["run"] for step in job["steps"]
                   if "run" in step and step.get("name") != "toolchain"]
            for name, job in jobs.items()}


def gitlab_jobs() -> dict[str, list[str]]:
    recipe = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())
    return {name: job["script"] for name, job in recipe.items()
            if isinstance(job, dict) and "script" in job}


def job_variables(jobs, root) -> dict[str, str]:
    """The release job's own environment (GitLab's `variables:`), as the runner sets it."""
    if jobs is not gitlab_jobs:
        return {}
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["release"]
    return {k: str(v).replace("$CI_PROJECT_DIR", str(root))
            for k, v in job.get("variables", {}).items()}


@pytest.mark.parametrize("jobs", [github_jobs, gitlab_jobs], ids=["github", "gitlab"])
def test_the_release_job_runs_as_written(tmp_path, jobs):
    root = copy_example("make-c", tmp_path)
    units = tuple(sorted(str(p.relative_to(root)) for p in root.glob("lib/*.c"))) + (
        "src/main.c",)
    shipped_database(root, "dataproc", units, STAGES)
    said = ""
    env = {**env_with_autopass(), **job_variables(jobs, root)}
    for command in jobs()["release"]:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=root,
                              env=env, capture_output=True, text=True)
        said += done.stdout + done.stderr
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    assert "PGO retrained" in said, said
    assert "compiles from the cache: instrumented" in said, said   # ccache, in its folder
    assert "recommendation:" in said, said           # db status said what applies
    assert (root / "dataproc").is_file() and (root / "autopass.trained.flags.json").is_file()
    check = subprocess.run(["make", "check"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("jobs", [github_jobs, gitlab_jobs], ids=["github", "gitlab"])
def test_the_tune_jobs_commands_are_autopass_commands(jobs):
    commands = [part.strip() for line in jobs()["tune"] for part in line.split("&&")]
    autopass = [shlex.split(c, comments=True) for c in commands if c.startswith("autopass")]
    assert [a[1] for a in autopass] == ["record", "tune"], commands
    for argv in autopass:
        build_parser().parse_args(argv[1:])          # an unknown option exits 2
