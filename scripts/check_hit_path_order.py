#!/usr/bin/env python3
"""Checks that the functions of a cache hit lie together in the opcache program.

cmake/HitPathOrder.cmake links `opcache` with the functions named in
cmake/hit-path.order side by side, so that a hit touches a few contiguous
pages of code. This check reads the program's symbols (`nm -S`) and fails when

  * fewer than half of the listed functions are in the program: the list is
    stale (run scripts/hit-path-order.sh), or
  * the densest range holding 80 % of the listed functions that are present is
    more than twice their total size: the link did not place them together.
    (Linked in the default order, that range is most of the 6 MiB of .text.)

Usage: check_hit_path_order.py PROGRAM ORDER_FILE
Exit status: 0 when both hold, 1 when one does not, 2 on bad usage.
"""
import subprocess
import sys

COVERED_SHARE = 0.8  # the share of the listed functions the range must hold
SLACK = 2.0          # how much larger than their total size the range may be


def read_order(path):
    with open(path, encoding="utf-8") as order:
        return {line.strip() for line in order if line.strip() and not line.startswith("#")}


def read_functions(program):
    """Maps each function symbol of PROGRAM to (address, size)."""
    listing = subprocess.run(["nm", "-S", "--defined-only", program], check=True,
                             capture_output=True, text=True).stdout
    functions = {}
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            functions[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return functions


def densest_span(addresses, count):
    """The smallest distance between the first and the last of COUNT consecutive sorted addresses."""
    addresses = sorted(addresses)
    return min(addresses[i + count - 1] - addresses[i] for i in range(len(addresses) - count + 1))


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    program, order_path = argv[1], argv[2]
    listed = read_order(order_path)
    functions = read_functions(program)
    present = {name: functions[name] for name in listed if name in functions}
    print(f"{len(present)} of the {len(listed)} functions of {order_path} are in {program}")
    if len(present) * 2 < len(listed):
        print(f"FAIL: the list is stale: run scripts/hit-path-order.sh and commit {order_path}")
        return 1
    # One function may have several names (a constructor's C1 and C2): count its code once.
    by_address = {address: size for address, size in present.values()}
    total_size = sum(by_address.values())
    count = max(1, int(len(by_address) * COVERED_SHARE))
    span = densest_span(by_address.keys(), count)
    print(f"{count} of {len(by_address)} hit functions ({total_size} bytes in all) lie within {span} bytes")
    if span > SLACK * total_size:
        print(f"FAIL: the hit's functions are spread over {span} bytes, more than {SLACK:g} x their size: "
              "was the program linked with cmake/HitPathOrder.cmake's ordering?")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
