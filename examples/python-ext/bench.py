"""The extension's own benchmark: python bench.py PATH_TO_THE_EXTENSION [size] [rounds].

Loads the extension from the given file (so autopass can point it at a candidate build)
and prints a checksum that any correct build reproduces."""
import importlib.util
import sys

path = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 8
spec = importlib.util.spec_from_file_location("_fastkern", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.run(size, rounds))
