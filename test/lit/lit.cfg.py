# lit configuration for refjit's text tests: every *.jaxpr file under test/lit is a test whose
# RUN lines call the `refjit` tool and check its output with FileCheck.
#
# Run from the build (ctest -R lit), or by hand:
#   python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv test/lit --param refjit_bin=build/release/bin
import os

import lit.formats

config.name = "refjit"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".jaxpr"]
config.test_source_root = os.path.dirname(__file__)
# Inputs/ folders hold programs that tests feed to refjit (e.g. malformed ones), not tests.
config.excludes = ["Inputs"]

refjit_bin = lit_config.params.get("refjit_bin")
if not refjit_bin:
    lit_config.fatal("pass the directory of the refjit binary: --param refjit_bin=<build>/bin")
refjit = os.path.join(os.path.abspath(refjit_bin), "refjit")
if not os.access(refjit, os.X_OK):
    lit_config.fatal("no refjit executable at " + refjit)

# Temporary files (%t) go to the build tree, next to bin/, never into the sources.
config.test_exec_root = os.path.join(os.path.dirname(os.path.abspath(refjit_bin)), "lit-output")

# `refjit` as a command word in RUN lines means the tool under test. The pattern skips
# `refjit` inside paths (a checkout in a directory named refjit); FileCheck and `not` come
# from LLVM 19.
config.substitutions.append((r"(?<![\w/.-])refjit(?![\w/.-])", refjit))
# The pipeline verifies the program after every pass (driver/pipeline.h).
config.environment["REFJIT_VERIFY_EACH"] = "1"
config.environment["REFJIT_POISON_OUTPUTS"] = "1"
config.environment["PATH"] = os.pathsep.join(
    ["/usr/lib/llvm-19/bin", config.environment.get("PATH", os.environ.get("PATH", ""))]
)
