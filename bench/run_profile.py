"""Where a whole ``galfast run`` spends its wall time: the command under cProfile, from the
first import of galfast to the written record, with the busiest calls by cumulative time.

    python bench/run_profile.py [--stats out.prof] -- run --dataset synthetic-movielens-1m \
        --encoder cheb --seeds 1 --device cuda --quiet

Prints the wall time of the imports and of the command, then the top of the profile (cumulative
seconds per function, which nests: the run, then its phases, then their parts). GPU work shows
as the host time of the calls that wait for it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stats", help="also write the raw profile here (pstats format)")
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="the galfast command line")
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv

    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    import galfast.cli

    imported = time.perf_counter()
    status = galfast.cli.main(argv)
    profile.disable()
    end = time.perf_counter()
    print(f"imports {imported - start:.2f} s, command {end - imported:.2f} s, status {status}")
    if args.stats:
        profile.dump_stats(args.stats)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
    print(text.getvalue())


if __name__ == "__main__":
    main()
