# Sourced by the scripts: where the caches that outlive a clone live, and the compiler cache's
# settings. CI runs in a fresh clone each time, on the machine the session that submitted it built
# on, so what is cached here (not in build/) is what makes its run warm:
#   $HOSTAGENT_CACHE_DIR/ccache       objects of both trees (ccache)
#   $HOSTAGENT_CACHE_DIR/clang-tidy   units clang-tidy found clean (scripts/lib/tidy_cache.py)
#   $HOSTAGENT_CACHE_DIR/package      the Debian 12 root the packages are installed into
#   $HOSTAGENT_CACHE_DIR/kernel       the netdevsim module built for the harness's kernel
# HOSTAGENT_CACHE_DIR defaults to /var/cache/hostagent; `rm -rf` it for a cold run.
: "${HOSTAGENT_CACHE_DIR:=/var/cache/hostagent}"
export HOSTAGENT_CACHE_DIR
# ccache: paths under the checkout are rewritten relative to the build directory (base_dir) and the
# working directory is not hashed (the checkout's path would reach the key through -g otherwise), so
# two clones at different paths share every object whose compile line names no path of its own
# (tests/support/test_support.cpp is the one unit that does, on purpose).
export CCACHE_DIR="$HOSTAGENT_CACHE_DIR/ccache"
CCACHE_BASEDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CCACHE_BASEDIR
export CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
export CCACHE_COMPRESS=true
