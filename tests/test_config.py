"""autopass.toml: typed, validated, unknown keys rejected with a suggestion."""

from __future__ import annotations

import pytest

from autopass_build import config as cfg


def test_starter_file_parses_and_has_defaults():
    config = cfg.parse(cfg.starter_text("make -j4", "bin/app"))
    assert config.build.command == ("sh", "-c", "make -j4")     # a string: as a shell runs it
    assert config.run.command == ("{exe}",)
    assert config.run.target == "bin/app"
    assert config.measure.metric == "wall" and config.check.mode == "output"


def test_the_starter_file_documents_every_key():
    """`autopass init` is where users learn the keys: each field of each section is in
    it, set or commented out, so a new key cannot land undocumented."""
    from dataclasses import fields

    text = cfg.starter_text("make", "app")
    for section, kind in cfg.SECTIONS.items():
        body = text.split(f"[{section}]\n", 1)[1].split("\n[", 1)[0]
        missing = [f.name for f in fields(kind)
                   if f"\n{f.name} =" not in "\n" + body and f"# {f.name} =" not in body]
        assert not missing, f"[{section}] lacks {missing}"


def test_full_file():
    config = cfg.parse('''
[run]
command = ["{exe}", "--size", "big file.txt"]
cwd = "data"
env = { LC_ALL = "C" }
timeout = 30
[check]
mode = "command"
command = "./check.sh {outdir}"
[measure]
metric = "instructions"
min_pairs = 3
max_pairs = 9
''', project_dir="/p")
    assert config.run.command == ("{exe}", "--size", "big file.txt")
    assert config.run.env == (("LC_ALL", "C"),)
    assert config.run.timeout == 30.0
    assert config.check.command == ("./check.sh", "{outdir}")
    assert config.measure.max_pairs == 9
    assert config.resolve("data") == "/p/data"


@pytest.mark.parametrize("text, message", [
    ("[run]\ncomand = '{exe}'", "unknown key [run].comand; did you mean 'command'?"),
    ("[mesure]\nmetric = 'wall'", "unknown section [mesure]; did you mean 'measure'?"),
    ("[measure]\nmetric = 'time'", "[measure].metric = 'time' is not one of wall, cpu"),
    ("[measure]\nmin_pairs = 'five'", "[measure].min_pairs must be an integer, not 'five'"),
    ("[measure]\nmin_pairs = 10\nmax_pairs = 5", "min_pairs <= max_pairs"),
    # out-of-range numbers that would silently tune everything, never stop, or kill all
    ("[tune]\ncoverage = 150", "[tune].coverage = 150 must be at most 100: give one in (0, 100]; it is a percentage"),
    ("[measure]\nprecision = 2", "[measure].precision = 2 must be below 0.5: give one in (0, 0.5); it is the interval's half-width"),
    ("[measure]\ntimeout_factor = 0.5", "[measure].timeout_factor = 0.5 must be at least 1; a smaller one would kill"),
    ("[run]\ncommand = 'bench input'", 'must contain "{exe}"'),
    ("[run]\ncommand = 'unterminated \"quote'", "write it as a list of strings"),
    ("[run]\ntimeout = -1", "[run].timeout = -1 must be above 0; it is a time limit in seconds"),
    ("[check]\nmode = 'command'", "needs [check].command"),
    ("[check]\nmode = 'numbers'\ntolerance = 0", "[check].tolerance = 0 must be above 0; it is a relative difference"),
    ("[check]\nmode = 'approx'", "is not one of output, numbers, exit-code, command"),
    ("[check]\nfiles = 'out.j2k'", '[check].files must be a list of paths, e.g. ["out.bin"]'),
    ("[measure]\npin_cpu = 'yes'", "[measure].pin_cpu must be true or false"),
    ("[check]\nignore = 'Time'", '[check].ignore must be a list of at most 32 regular'),
    ("[check]\nignore = ['ok', '(secs']",
     "[check].ignore[1] = '(secs' is not a regular expression (missing ), unterminated"),
    ("[check]\nignore = ['" + "x" * 201 + "']", "[check].ignore[0] is 201 characters long"),
    ("[run\n", "not valid TOML"),
    ("[run]\ntarget = 'a'\ntarget = 'b'", "that line sets a key an earlier line of its table"),
    # a checker next to another mode would never run: the user's check silently ignored
    ("[check]\nmode = 'output'\ncommand = ['./check.sh', '{outdir}']",
     '[check].command runs only with mode = "command", and mode is \'output\''),
    # TOML's \u0000 reached subprocess, which raised ValueError: a traceback
    ('[run]\ncommand = ["{exe}", "a\\u0000b"]', "[run].command holds a NUL character"),
    ('[run]\nenv = { A = "\\u0000" }', "[run].env holds a NUL character"),
    ('[check]\nfiles = ["out\\u0000"]', "[check].files holds a NUL character"),
])
def test_bad_config_names_the_key_and_the_fix(text, message):
    with pytest.raises(cfg.ConfigError) as error:
        cfg.parse(text)
    assert message in str(error.value)


def test_a_check_command_alone_is_the_check():
    """`command` without `mode` (the starter's commented line uncommented) is the check
    the user means; before, mode stayed "output" and the checker never ran."""
    config = cfg.parse("[check]\ncommand = ['./check.sh', '{outdir}']\n")
    assert config.check.mode == "command" and config.check.command == ("./check.sh", "{outdir}")
    assert cfg.parse("[check]\nfiles = ['out.bin']\n").check.mode == "output"


def test_load_finds_the_file_upwards_and_names_it_in_errors(tmp_path):
    (tmp_path / "autopass.toml").write_text("[run]\ncommand = '{exe} 1'\n")
    (tmp_path / "sub").mkdir()
    config = cfg.load(start=str(tmp_path / "sub"))
    assert config.run.command == ("{exe}", "1") and config.project_dir == str(tmp_path)
    (tmp_path / "autopass.toml").write_text("[run]\nbogus = 1\n")
    with pytest.raises(cfg.ConfigError, match=str(tmp_path / "autopass.toml")):
        cfg.load(start=str(tmp_path))


def test_command_line_overrides_are_validated():
    config = cfg.parse("[measure]\nmetric = 'cpu'\n")
    assert cfg.with_overrides(config, measure={"metric": "wall", "max_pairs": None}
                              ).measure.metric == "wall"
    with pytest.raises(cfg.ConfigError):
        cfg.with_overrides(config, measure={"min_pairs": 1})


def test_a_config_anybody_could_edit_is_refused(tmp_path):   # docs/RELIABILITY.md S3
    import os
    path = tmp_path / "autopass.toml"
    path.write_text('[run]\ncommand = "{exe}"\n')
    path.chmod(0o666)
    with pytest.raises(cfg.ConfigError, match="writable by every user"):
        cfg.load(str(path))
    path.chmod(0o644)
    assert cfg.load(str(path)).run.command == ("{exe}",)
    os.chown(path, 12345, 12345)
    with pytest.raises(cfg.ConfigError, match="belongs to another user"):
        cfg.load(str(path))
