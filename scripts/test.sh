#!/usr/bin/env bash
# The test command: the whole test suite on this machine, in strict mode (a test that
# cannot run for lack of a tool fails instead of being skipped). See docs/tests.md.
#
#   scripts/test.sh
#
# 1. Debian packages the tests need (gcc, valgrind, bubblewrap, graphviz, Slurm and munge,
#    the aarch64 cross compiler and libc, qemu-user, pkg-config, libssl-dev): installed
#    with apt-get when run as root; otherwise the exact `apt-get install` line is printed
#    and the script stops. The Rust target aarch64-unknown-linux-gnu is added with rustup.
# 2. A Slurm cluster for tests/slurm.rs: the one that answers `sinfo` if there is one (left
#    alone); else, as root, the single-node cluster of scripts/slurm-local.sh, stopped again
#    when this script ends (also on failure or Ctrl-C).
# 3. NGCC_STRICT_TESTS=1 cargo test --workspace --release --no-fail-fast
# 4. aarch64 (on another architecture): the workspace cross-built, and kem-native's tests
#    run under qemu-user.
# 5. As root: the hostile suites (tests/hostile/, tests/containment/) again as the
#    unprivileged user `ngcc-test` (created if missing): the sandbox must contain KEMs,
#    imports and names without root too.
#
# Every stage runs; the script exits 1 if any failed and names them. CI runs it through
# .ci/run (as root, on a fresh Debian clone, CI=true, no stdin).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
    echo "usage: scripts/test.sh (no arguments; run single tests with cargo test)" >&2
    exit 2
fi

say() { printf '\n== %s\n' "$*" >&2; }
root=no
[ "$(id -u)" -eq 0 ] && root=yes
arm=aarch64-unknown-linux-gnu
host=$(uname -m)
have() { command -v "$1" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$1" >/dev/null 2>&1; }

# ---- 1. packages -------------------------------------------------------------------------
need=()
have gcc || need+=(gcc libc6-dev)
have pkg-config || need+=(pkg-config)
have pkg-config && ! pkg-config --exists openssl 2>/dev/null && need+=(libssl-dev)
have pkg-config || need+=(libssl-dev)
have dot || need+=(graphviz)
have bwrap || need+=(bubblewrap)
have valgrind || need+=(valgrind)
have clang-16 || need+=(clang-16)
if [ "$host" != aarch64 ]; then
    have aarch64-linux-gnu-gcc || need+=(gcc-aarch64-linux-gnu)
    [ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ] || need+=(libc6-dev-arm64-cross)
    have qemu-aarch64 || need+=(qemu-user)
fi
{ have slurmctld && have slurmd && have sinfo; } || need+=(slurm-wlm)
have munged || need+=(munge)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$root" = yes ] && have apt-get; then
        say "installing: ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need[@]}" </dev/null
    else
        echo "scripts/test.sh: the tests need these Debian packages; install them as root:" >&2
        echo "    apt-get update && apt-get install -y ${need[*]}" >&2
        exit 1
    fi
fi
if ! have cargo; then
    echo "scripts/test.sh: cargo is missing: install the Rust toolchain (https://rustup.rs)" >&2
    exit 1
fi
if [ "$host" != aarch64 ]; then
    sysroot=$(rustc --print sysroot)
    if [ ! -d "$sysroot/lib/rustlib/$arm" ]; then
        if have rustup; then
            say "adding the Rust target $arm"
            rustup target add "$arm"
        else
            echo "scripts/test.sh: the Rust target $arm is missing and rustup is not here to add it" >&2
            exit 1
        fi
    fi
fi

# ---- cleanup: whatever this script started or opened is undone at exit ---------------------
started_slurm=no
opened=()
scratch=
cleanup() {
    local d
    for d in "${opened[@]}"; do chmod o-x "$d" || true; done
    [ -n "$scratch" ] && rm -rf "$scratch"
    if [ "$started_slurm" = yes ]; then
        say "stopping the Slurm cluster this script started"
        scripts/slurm-local.sh stop || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- 2. Slurm ----------------------------------------------------------------------------
if sinfo -h -o %P >/dev/null 2>&1; then
    say "using the Slurm cluster that answers sinfo (left running)"
elif [ "$root" = yes ]; then
    say "starting a single-node Slurm cluster (scripts/slurm-local.sh)"
    started_slurm=yes
    scripts/slurm-local.sh start
else
    echo "scripts/test.sh: no Slurm cluster answers \`sinfo\`; start one as root with" >&2
    echo "    sudo scripts/slurm-local.sh start" >&2
    echo "(and stop it with \`sudo scripts/slurm-local.sh stop\`), or run this script as root." >&2
    exit 1
fi

# ---- 3-5. the tests ----------------------------------------------------------------------
export NGCC_STRICT_TESTS=1
failed=()
stage() {
    local name=$1
    shift
    say "$name"
    if ! "$@"; then
        failed+=("$name")
    fi
}

stage "cargo test --workspace --release" cargo test --workspace --release --no-fail-fast

cross() {
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
    cargo build --workspace --release --target "$arm" &&
        TARGET_CC=aarch64-linux-gnu-gcc cargo test -p kem-native --release --target "$arm"
}
if [ "$host" != aarch64 ]; then
    stage "aarch64: cross build, kem-native tests under qemu-user" cross
fi

unprivileged() {
    local user=ngcc-test dir hostile home
    id "$user" >/dev/null 2>&1 ||
        useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    # The clone may live under a folder only root may enter (e.g. /root): let the user pass
    # through (search permission only, no listing) while this script runs.
    dir=$(pwd)
    while [ "$dir" != / ]; do
        dir=$(dirname "$dir")
        if ! runuser -u "$user" -- test -x "$dir"; then
            chmod o+x "$dir"
            opened+=("$dir")
        fi
    done
    if ! runuser -u "$user" -- test -r Cargo.toml; then
        echo "the checkout $(pwd) must be readable by the unprivileged user $user" >&2
        return 1
    fi
    scratch=$(mktemp -d)
    home="$scratch/home"
    mkdir "$home"
    chown -R "$user" "$scratch"
    local t bin status=0
    for t in hostile containment; do
        bin=$(cargo test --release --test "$t" --no-run 2>&1 |
            sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -n 1)
        [ -x "$bin" ] || { echo "the $t test binary was not found" >&2; return 1; }
        runuser -u "$user" -- env -i PATH="$PATH" HOME="$home" TMPDIR="$scratch" \
            NGCC_STRICT_TESTS=1 "$bin" || status=1
    done
    return $status
}
if [ "$root" = yes ]; then
    stage "tests/hostile and tests/containment as an unprivileged user" unprivileged
fi

if [ ${#failed[@]} -gt 0 ]; then
    printf '\nscripts/test.sh: FAILED:\n' >&2
    printf '  - %s\n' "${failed[@]}" >&2
    exit 1
fi
printf '\nscripts/test.sh: all tests passed\n' >&2
