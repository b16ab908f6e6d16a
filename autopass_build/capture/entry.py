"""`autopass-cc` and `autopass-c++`: one compile (wrapper.main), or one of the two
service calls of the launcher's server on demand (on_demand.py): serve, or say where
the native launcher is.  Runs in every compile the Python wrapper takes: core imports
only."""

from __future__ import annotations

import sys

from autopass_build.capture.wrapper import main as compile_main
from autopass_build.core.names import SERVICE_OPTIONS


def main(argv: list[str] | None = None) -> int:
    args = sys.argv if argv is None else argv
    if len(args) > 1 and args[1] in SERVICE_OPTIONS:
        from autopass_build.capture import on_demand
        return on_demand.service(list(args[1:]))
    return compile_main(argv)


if __name__ == "__main__":
    sys.exit(main())
