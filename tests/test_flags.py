"""The flag allowlist (docs/RELIABILITY.md S1), including a fuzzer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopass_build.core import flags

ALLOWED = [
    ["-O3"], ["-O2", "-fno-unroll-loops"], ["-funroll-loops", "-fno-vectorize"],
    ["-mllvm", "-inline-threshold=500"], ["-march=native"], ["-mtune=znver3"],
    ["-mavx2", "-mno-avx512f"], ["-ffast-math"], ["-falign-functions=32"],
    ["-mprefer-vector-width=256"], ["-fno-lto", "-funroll-loops"],
]
REJECTED = [
    "-fplugin=/tmp/evil.so", "-fpass-plugin=x.so", "-Xclang", "-load", "-B/tmp",
    "-specs=x", "--config=x", "-fuse-ld=lld", "-Wl,--wrap=main", "-Wa,-x", "-Wp,-MD,x",
    "-o", "-MF", "-I/tmp", "-include", "@file", "-save-temps", "-fprofile-generate=/tmp",
    "-fprofile-instr-use=x", "-O3 -fplugin=x", "-O3\n", "-O\x003", "-march=$(touch x)",
    "-mllvm", "-DX=1", "-c", "-x", "--sysroot=/", "-fsanitize=address",
    "-flto", "-flto=thin",     # a unit may leave LTO, never enter it: the link would break
]


@pytest.mark.parametrize("tokens", ALLOWED)
def test_allowed(tokens):
    assert flags.validate(tokens) == tuple(tokens)


@pytest.mark.parametrize("token", REJECTED)
def test_rejected(token):
    with pytest.raises(flags.FlagError):
        flags.validate([token])


def test_a_unit_may_leave_lto_but_not_enter_it():
    with pytest.raises(flags.FlagError, match=r"link-time optimization is a whole-program stage .* only leave it \(-fno-lto\)"):
        flags.validate(["-O2", "-flto=thin"])
    assert flags.validate(["-fno-lto"]) == ("-fno-lto",)


@pytest.mark.parametrize("option", ["-load=x.so", "-debug-pass=x", "-inline-threshold=1 2",
                                    "inline-threshold=5", "-inline-threshold=$(x)"])
def test_mllvm_options_are_allowlisted_too(option):
    with pytest.raises(flags.FlagError):
        flags.validate(["-mllvm", option])


def test_parse_splits_like_a_shell_without_expanding():
    assert flags.parse("-O3 -mllvm -unroll-threshold=300") == (
        "-O3", "-mllvm", "-unroll-threshold=300")
    with pytest.raises(flags.FlagError, match="rejected"):
        flags.parse("-O3 '$(touch canary)'")


DANGEROUS_PREFIXES = ("-fplugin", "-fpass-plugin", "-Xclang", "-load", "-B", "-o", "-I",
                      "-include", "@", "-W", "-fprofile", "-save-temps", "-specs", "--",
                      "-L", "-l", "-D", "-U", "-M", "-x", "-fuse-ld")


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(
    st.text(min_size=0, max_size=24),
    st.sampled_from(["-mllvm", "-O3", "-fplugin=a", "-Xclang", "-march=x86-64", "-Wl,-x"]),
    st.builds(lambda a, b: a + b, st.sampled_from(["-f", "-m", "-fno-", "-O", "-mllvm", "-"]),
              st.text(max_size=16))), max_size=6))
def test_fuzz_validator_never_accepts_anything_dangerous(tokens):
    try:
        accepted = flags.validate(tokens)
    except flags.FlagError:
        return
    for i, token in enumerate(accepted):
        assert not any(c.isspace() or ord(c) < 32 for c in token)
        if i > 0 and accepted[i - 1] == "-mllvm":
            assert token.lstrip("-").split("=")[0] in flags.MLLVM_OPTIONS
            continue
        assert token == "-mllvm" or not token.startswith(DANGEROUS_PREFIXES), token


def test_front_end_flags_are_not_replayed_from_ir():
    assert flags.replayable_from_ir(("-O3", "-funroll-loops"), "-O2")
    assert flags.replayable_from_ir(("-mllvm", "-inline-threshold=900"), "-O0")
    assert not flags.replayable_from_ir(("-Os",), "-O2")
    assert not flags.replayable_from_ir(("-fno-unroll-loops",), "-O2")
    assert not flags.replayable_from_ir(("-ffast-math",), "-O2")
    assert not flags.replayable_from_ir(("-march=native",), "-O2")
    assert not flags.replayable_from_ir(("-O3",), "-O0")
