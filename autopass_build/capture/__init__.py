"""The compiler wrapper (`autopass-cc`, `autopass-c++`): one compiler call classified
(compiler_args, option_table, response_files), resolved (plan, host) and handed to
record/ or apply/; the ways a build reaches it (entry, wrapper, server, on_demand,
build_env).  Runs inside every compile of a user's build: imports only core/ and
itself."""
