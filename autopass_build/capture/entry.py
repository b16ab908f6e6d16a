"""`autopass-cc` and `autopass-c++`: one compile (wrapper.main), or one of the service
calls that cmake/AutoPass.cmake and the native launcher make:

    --autopass-serve SOCKET     serve the launchers of a folder (on_demand.py)
    --autopass-launcher FOLDER  write the native launcher into a build folder; print its
                                autopass-cc (exit 1 where none can be compiled)
    --autopass-ir-plugin        print record's IR-saving pass plugin and the clang it is
                                built for, a line each (exit 1 where there is none)

Runs in every compile the Python wrapper takes: it imports no more than the wrapper does,
the services' modules on demand."""

from __future__ import annotations

import os
import sys

from autopass_build.capture.wrapper import main as compile_main
from autopass_build.core.names import IR_PLUGIN_OPTION, LAUNCHER_OPTION, SERVE_OPTION

SERVICES = {SERVE_OPTION: "a socket's path", LAUNCHER_OPTION: "a folder", IR_PLUGIN_OPTION: ""}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv if argv is None else argv
    if len(args) > 1 and args[1] in SERVICES:
        return _service(args[1], args[2:])
    return compile_main(argv)


def _service(option: str, operands: list[str]) -> int:
    wanted = SERVICES[option]
    if len(operands) != (1 if wanted else 0):
        print(f"autopass-cc: error: {option} takes " + (wanted or "no argument"),
              file=sys.stderr)
        return 2
    if option == SERVE_OPTION:
        from autopass_build.capture.on_demand import serve_on_demand
        return serve_on_demand(operands[0])
    from autopass_build.capture import build_env, native_builds
    if option == LAUNCHER_OPTION:
        try:
            cc = build_env.cmake_launcher(os.path.abspath(operands[0]))
        except OSError as error:
            print(f"autopass-cc: cannot write the launcher into {operands[0]}: "
                  f"{error.strerror}", file=sys.stderr)
            return 1
        if cc is None:
            print("autopass-cc: no native launcher could be compiled here (is clang "
                  "installed?): compiles start Python each", file=sys.stderr)
            return 1
        print(cc)
        return 0
    plugin = native_builds.pass_plugin(build_env.wrapper_dir(os.path.join(os.getcwd(),
                                                                        ".autopass")))
    if plugin is None:
        return 1
    print("\n".join(plugin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
