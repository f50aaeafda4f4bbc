#!/usr/bin/env python3
"""Prints, once each and in the order first seen, the (mangled) names of the functions of one
executable that ran, read from callgrind output files written with `--compress-strings=no
--demangle=no`. Used by generate.sh to write daemon/symbol-order.txt."""
import re
import sys


def executed(object_suffix, paths):
    names, seen = [], set()
    for path in paths:
        caller_object = callee_object = None
        with open(path, errors="replace") as lines:
            for line in lines:
                if line.startswith("ob="):
                    caller_object = line[3:].strip()
                elif line.startswith("cob="):
                    callee_object = line[4:].strip()
                elif line.startswith("fn=") or line.startswith("cfn="):
                    is_callee = line.startswith("cfn=")
                    name = line.split("=", 1)[1].strip()
                    owner = (callee_object or caller_object) if is_callee else caller_object
                    if not is_callee:
                        callee_object = None
                    # callgrind marks recursion depth as name'2; addresses without a
                    # symbol and "(below main)" name nothing the linker can place.
                    name = re.sub(r"'\d+$", "", name)
                    if not owner or not owner.endswith(object_suffix):
                        continue
                    if not name or name.startswith("0x") or name.startswith("("):
                        continue
                    if name not in seen:
                        seen.add(name)
                        names.append(name)
    return names


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: executed_functions.py OBJECT_SUFFIX CALLGRIND_FILE...")
    print("\n".join(executed(sys.argv[1], sys.argv[2:])))
