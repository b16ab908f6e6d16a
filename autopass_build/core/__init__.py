"""What every layer stands on: processes (proc), finding LLVM (toolchain), outcomes,
the flag allowlist (flags), the flags database's one loader (flags_db), what each stage
adds to a build (stage_flags), a PGO profile and clang's word on its fit (pgo_profile),
decisions carried in the IR (decisions), names and defaults (names), hashing and atomic
files (files), the one base of user-facing errors (errors).  The compiler wrapper
imports parts of it in every compile: light imports only."""
