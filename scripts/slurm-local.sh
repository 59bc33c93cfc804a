#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for trying and testing the Slurm executor
# (pipelines with `executor "slurm"`). Needs root and Debian's `slurm-wlm` and `munge`.
#
#   scripts/slurm-local.sh start    munge key, munged, slurm.conf (one node = this machine's
#                                   CPUs and memory, partition `ngcc`), slurmctld + slurmd;
#                                   waits until `sinfo` shows the node idle
#   scripts/slurm-local.sh stop     stops slurmd, slurmctld and the munged it started
#   scripts/slurm-local.sh status   sinfo and squeue
#
# State (logs, spool, pid files) lives in $NGCC_SLURM_DIR (default /var/tmp/ngcc-slurm).
# The configuration is written to /etc/slurm/slurm.conf, where Slurm's commands look for it;
# an existing slurm.conf that this script did not write is left alone (start refuses).
set -euo pipefail

dir=${NGCC_SLURM_DIR:-/var/tmp/ngcc-slurm}
conf=/etc/slurm/slurm.conf
marker="# written by ngcc-pipe scripts/slurm-local.sh"
partition=ngcc

die() { echo "slurm-local: $*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "run as root (slurmd must start jobs as their user)"
    for t in slurmctld slurmd munged sinfo; do
        command -v "$t" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$t" >/dev/null 2>&1 ||
            die "\`$t\` not found: apt-get install slurm-wlm munge"
    done
    export PATH=$PATH:/usr/sbin
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() {
    local pidfile=$1
    if alive "$pidfile"; then
        local pid
        pid=$(cat "$pidfile")
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile"
}

start() {
    need_root
    if [ -f "$conf" ] && ! grep -qxF "$marker" "$conf"; then
        die "$conf exists and was not written by this script; not touching it"
    fi
    mkdir -p "$dir/ctld" "$dir/spool" "$dir/munge"
    # Munge: a key if there is none, and a daemon of our own (socket under $dir).
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge
    chown munge:munge /run/munge "$dir/munge"
    if ! alive "$dir/munge/munged.pid"; then
        runuser -u munge -- munged --pid-file="$dir/munge/munged.pid" \
            --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
    fi
    # One node: this machine as slurmd sees it (CPUs, sockets, cores, memory).
    local node host
    node=$(slurmd -C | head -n 1)
    host=$(hostname -s)
    cat > "$conf" <<EOF
$marker
ClusterName=ngcc-local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
ReturnToService=2
KillWait=5
$node State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    alive "$dir/slurmctld.pid" || slurmctld
    alive "$dir/slurmd.pid" || slurmd
    for _ in $(seq 300); do
        if sinfo -h -p "$partition" -o '%t' 2>/dev/null | grep -qx idle; then
            sinfo
            return 0
        fi
        sleep 0.1
    done
    sinfo >&2 || true
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    die "the node did not become idle within 30 s (logs above)"
}

stop() {
    need_root
    stop_pid "$dir/slurmd.pid"
    stop_pid "$dir/slurmctld.pid"
    stop_pid "$dir/munge/munged.pid"
}

status() {
    export PATH=$PATH:/usr/sbin
    sinfo
    squeue
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
